"""The import layers of ``pyproject.toml``'s ``[tool.importlinter]`` hold (import-linter reads
every module's imports without running them)."""

from __future__ import annotations

from importlinter.cli import lint_imports

from evidence import REPOSITORY


def test_the_import_contracts_hold() -> None:
    assert lint_imports(config_filename=str(REPOSITORY / "pyproject.toml"), no_cache=True) == 0
