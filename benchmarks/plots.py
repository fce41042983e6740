"""Plots of the benchmark results in ``benchmarks/results/``, for the docs.

The docs draw their figures from the saved JSON files, never from numbers typed by hand, so a
rerun of a benchmark updates its plot. This module needs only matplotlib and the standard
library (no torch), so the docs build can import it; call it from matplotlib's plot
directive, for example::

    .. plot::

       import sys
       sys.path.insert(0, "../benchmarks")
       from plots import plot_host_heap
       plot_host_heap("../benchmarks/results/host_heap.json")
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any, Dict, List, Optional, Union

from matplotlib.axes import Axes
from matplotlib.figure import Figure, FigureBase

logger = logging.getLogger(__name__)

GiB = 1024**3

# Figures of the host-heap JSON that plot_host_heap can draw: key -> (axis label, scale).
HOST_HEAP_METRICS = {
    "kept_after_trim": ("RSS kept after the last burst (GiB)", GiB),
    "first_kept_after_trim": ("RSS kept after the first burst (GiB)", GiB),
    "kept_after_free": ("RSS kept after the free, before any trim (GiB)", GiB),
    "burst_s": ("time of the first burst (s)", 1.0),
    "warm_burst_s": ("time of the second burst (s)", 1.0),
}


def _load(json_path: Union[str, Path]) -> Dict[str, Any]:
    with open(json_path, encoding="utf-8") as handle:
        document: Dict[str, Any] = json.load(handle)
    if document.get("benchmark") != "host_heap":
        raise ValueError(f"{str(json_path)!r} is not a host_heap result file")
    return document


def plot_host_heap(
    json_path: Union[str, Path],
    ax: Optional[Union[Axes, Figure]] = None,
    *,
    metric: str = "kept_after_trim",
    log_scale: bool = False,
) -> FigureBase:
    """Draw the RSS kept per case of ``host_heap.json`` as grouped bars, one group per case.

    Each bar is the median over the repeats, one colour per burst size, with the case's
    figure written above it, so that a case that keeps almost nothing still reads as a number
    rather than an invisible bar.

    Args:
        json_path: A file written by ``benchmarks/host_heap/run.py``.
        ax: Axes to draw into, or a figure to add one axes to; a new pyplot figure if omitted
            (what matplotlib's plot directive captures).
        metric: Which median to draw: a key of :data:`HOST_HEAP_METRICS`.
        log_scale: Draw the values on a logarithmic axis.

    Returns:
        The figure (or subfigure) drawn into.
    """
    if metric not in HOST_HEAP_METRICS:
        raise ValueError(f"unknown metric {metric!r}; choose one of {sorted(HOST_HEAP_METRICS)}")
    document = _load(json_path)
    label, scale = HOST_HEAP_METRICS[metric]

    cases: List[str] = []
    for entry in document["summary"]:
        if entry["case"] not in cases:
            cases.append(entry["case"])
    sizes = sorted({entry["burst_gib"] for entry in document["summary"]})
    value = {
        (entry["case"], entry["burst_gib"]): entry["median"].get(metric)
        for entry in document["summary"]
    }

    figure: FigureBase
    if ax is None:
        import matplotlib.pyplot as plt

        figure, axes = plt.subplots(figsize=(max(6.0, 1.1 * len(cases)), 3.8))
    elif isinstance(ax, Figure):
        figure, axes = ax, ax.add_subplot()
    else:
        axes = ax
        figure = axes.figure

    width = 0.8 / max(1, len(sizes))
    for index, size in enumerate(sizes):
        positions = [
            case_index + (index - (len(sizes) - 1) / 2) * width for case_index in range(len(cases))
        ]
        figures = [value.get((case, size)) for case in cases]
        heights = [0.0 if median is None else median / scale for median in figures]
        bars = axes.bar(positions, heights, width, label=f"{size:g} GiB burst")
        texts = ["n/a" if median is None else f"{median / scale:.2f}" for median in figures]
        axes.bar_label(bars, labels=texts, fontsize=7, padding=2)

    axes.set_xticks(range(len(cases)))
    axes.set_xticklabels(cases, rotation=25, ha="right")
    axes.set_ylabel(label)
    if log_scale:
        axes.set_yscale("log")
    machine = document.get("machine", {})
    axes.set_title(
        f"Host heap after a builder-like burst ({machine.get('cpu_cores', '?')} cores, "
        f"glibc {machine.get('glibc', '?')}; median of {document['settings']['repeats']})",
        fontsize=9,
    )
    axes.legend(fontsize=8)
    if isinstance(figure, Figure):
        figure.tight_layout()
    logger.debug("plotted %s from %s", metric, json_path)
    return figure
