"""The label a build of the current overlay gets here (tests/docs compares the README's)."""

from patched_wheel.patch import current_label

LABEL = current_label()
