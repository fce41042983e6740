"""The result files as plots, drawn by name (:data:`PLOTS`) inside matplotlib's ``plot``
directive in the docs (``docsrc/conf.py`` imports this module for it)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, Sequence

from evidence import RESULTS
from evidence.result import ResultError, find_case, result_file
from evidence.tables import COMPILE_CASES, GiB


def plot_timelines(document: Dict[str, Any], case_ids: Sequence[str]) -> Any:
    """Host, GPU and host + GPU memory over time, a panel per case, its phases shaded and
    named (``series.timeline`` and ``series.phases``)."""
    import matplotlib.pyplot as plt

    cases = [find_case(document, case_id) for case_id in case_ids]
    missing = [entry["id"] for entry in cases if "timeline" not in entry.get("series", {})]
    if missing:
        raise ResultError(f"{document.get('_file')}: no series.timeline in {', '.join(missing)}")
    figure, panels = plt.subplots(
        len(cases), 1, figsize=(7.5, 2.4 * len(cases)), sharex=True, squeeze=False
    )
    for axes, entry in zip(panels[:, 0], cases):
        line = entry["series"]["timeline"]
        host = [value / GiB for value in line["host_bytes"]]
        gpu = [value / GiB for value in line["gpu_bytes"]]
        axes.plot(line["t_s"], host, label="host")
        axes.plot(line["t_s"], gpu, label="GPU")
        axes.plot(line["t_s"], [a + b for a, b in zip(host, gpu)], label="host + GPU", lw=0.8)
        for index, phase in enumerate(entry["series"].get("phases", [])):
            shade = "#eeeeee" if index % 2 else "#dde6f0"
            axes.axvspan(phase["start_s"], phase["end_s"], color=shade, zorder=0)
            style = dict(transform=axes.get_xaxis_transform(), fontsize=6, rotation=90)
            axes.text(phase["start_s"], 0.98, phase["name"], va="top", **style)
        axes.set_title(entry["label"].replace("`", ""), fontsize=8)
        axes.set_ylabel("GiB")
    panels[0, 0].legend(fontsize=7, loc="upper right")
    panels[-1, 0].set_xlabel("seconds")
    return figure


PLOTS = {"compile-timeline": COMPILE_CASES}


def plot(name: str, results: Path = RESULTS) -> Any:
    """Draw the named plot (in the docs, inside matplotlib's ``plot`` directive)."""
    if name not in PLOTS:
        raise ResultError(f"no plot {name!r}; known: {', '.join(PLOTS)}")
    stem, case_ids = PLOTS[name]
    return plot_timelines(result_file(stem, results), case_ids)
