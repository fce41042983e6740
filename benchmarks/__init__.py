"""The benchmarks: each ``benchmarks/<name>/run.py`` measures one thing and writes its result
file through :mod:`evidence.result` (``python -m benchmarks run NAME`` runs one).

:mod:`evidence` is imported first, so that the build tool it reads its facts from is importable
under its one name, ``patched_wheel``, in every process a benchmark starts (its docstring says
how).
"""

import evidence  # noqa: F401
