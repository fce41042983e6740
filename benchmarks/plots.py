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

Functions:

* :func:`plot_host_heap`: RSS kept after a builder-like burst, per allocator setting;
* :func:`plot_offload_overshoot`: host + GPU memory above the start of an offload, per
  strategy and model size, from a probed run of ``benchmarks/offload/run.py``;
* :func:`plot_offload_speed`: GB/s of the offload per strategy and model size, from unprobed
  runs (the probes slow the move, so probed runs are not used for speed);
* :func:`plot_fast_path_ceilings`: GB/s of the candidate copy paths of the offload fast path.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

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


MiB = 1024**2

# Order and colours of the offload strategies, upstream's first.
OFFLOAD_STRATEGIES = {
    "upstream": "#c44e52",
    "step-1GiB-plain": "#dd8452",
    "fork-plain": "#8172b3",
    "fork": "#4c72b0",
    "fork-step-0": "#64b5cd",
    "fork-step-64MiB": "#55a868",
    "fork-step-256MiB": "#937860",
}


def _load(json_path: Union[str, Path], benchmark: Optional[str] = "host_heap") -> Dict[str, Any]:
    with open(json_path, encoding="utf-8") as handle:
        document: Dict[str, Any] = json.load(handle)
    if benchmark is not None and document.get("benchmark") != benchmark:
        raise ValueError(f"{str(json_path)!r} is not a {benchmark} result file")
    return document


def _figure_and_axes(
    ax: Optional[Union[Axes, Figure]], figsize: Tuple[float, float]
) -> Tuple[FigureBase, Axes]:
    """The figure and axes to draw into: ``ax``'s, a new axes of figure ``ax``, or new ones."""
    if ax is None:
        import matplotlib.pyplot as plt

        figure, axes = plt.subplots(figsize=figsize)
        return figure, axes
    if isinstance(ax, Figure):
        return ax, ax.add_subplot()
    return ax.figure, ax


def _strategy_order(strategies: Sequence[str]) -> List[str]:
    known = [name for name in OFFLOAD_STRATEGIES if name in strategies]
    return known + sorted(set(strategies) - set(known))


def _grouped_bars(
    axes: Axes,
    groups: Sequence[str],
    series: Sequence[str],
    value: Dict[Tuple[str, str], float],
    texts: Dict[Tuple[str, str], str],
) -> None:
    """Bars of ``value[(group, name)]``, one group per x tick, one colour per series name."""
    width = 0.8 / max(1, len(series))
    for index, name in enumerate(series):
        positions = []
        heights = []
        labels = []
        for group_index, group in enumerate(groups):
            if (group, name) not in value:
                continue
            positions.append(group_index + (index - (len(series) - 1) / 2) * width)
            heights.append(value[(group, name)])
            labels.append(texts[(group, name)])
        missing = [
            group_index + (index - (len(series) - 1) / 2) * width
            for group_index, group in enumerate(groups)
            if (group, name) not in value
        ]
        for position in missing:
            axes.text(position, 0, "not run", rotation=90, fontsize=6, ha="center", va="bottom")
        if not positions:
            continue
        bars = axes.bar(positions, heights, width, label=name, color=OFFLOAD_STRATEGIES.get(name))
        axes.bar_label(bars, labels=labels, fontsize=6.5, padding=2, rotation=90)
    axes.set_xticks(range(len(groups)))
    axes.set_xticklabels(groups)


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


def plot_offload_overshoot(
    json_path: Union[str, Path], ax: Optional[Union[Axes, Figure]] = None
) -> FigureBase:
    """Draw the offload's overshoot (host + GPU above the start) per model and strategy.

    One group of bars per model (size and tensor mix), one bar per strategy, the height in
    multiples of the model size W, with the overshoot in GiB written on each bar. Only the
    overshoot of a probed run means anything; unprobed cases are skipped.

    Args:
        json_path: A file written by ``benchmarks/offload/run.py`` with its probes on.
        ax: Axes, or a figure to add one to; a new pyplot figure if omitted.

    Returns:
        The figure (or subfigure) drawn into.
    """
    document = _load(json_path, "offload")
    cases = [case for case in document["cases"] if case.get("probes", True)]
    groups: List[str] = []
    value: Dict[Tuple[str, str], float] = {}
    texts: Dict[Tuple[str, str], str] = {}
    for case in cases:
        group = f"{case['size_gib']} GiB, {case['mix']}"
        if group not in groups:
            groups.append(group)
        value[(group, case["strategy"])] = case["overshoot_W"]
        texts[(group, case["strategy"])] = f"{case['overshoot_bytes'] / GiB:.2f} GiB"
    strategies = _strategy_order([case["strategy"] for case in cases])
    figure, axes = _figure_and_axes(ax, (8.0, 4.2))
    _grouped_bars(axes, groups, strategies, value, texts)
    axes.set_ylabel("overshoot (multiples of W)")
    axes.set_ylim(0, max(value.values(), default=1.0) * 1.2)
    machine = document.get("machine", {})
    axes.set_title(
        f"Host + GPU memory above the start of the offload ({machine.get('gpu', '?')}, "
        f"torch {machine.get('torch', '?')})",
        fontsize=9,
    )
    axes.legend(fontsize=7, ncol=4, loc="upper center", bbox_to_anchor=(0.5, -0.1))
    if isinstance(figure, Figure):
        figure.tight_layout()
    return figure


def plot_offload_speed(
    json_paths: Sequence[Union[str, Path]], ax: Optional[Union[Axes, Figure]] = None
) -> FigureBase:
    """Draw the offload's speed (GB/s), one horizontal bar per unprobed case and file.

    A case measured in several files (a repeat) gets one bar per file, labelled with the
    file's name, so the spread between runs stays visible. Probed cases are skipped: the
    probes run after every tensor operation and slow the move.

    Args:
        json_paths: Files written by ``benchmarks/offload/run.py --no-probes``.
        ax: Axes, or a figure to add one to; a new pyplot figure if omitted.

    Returns:
        The figure (or subfigure) drawn into.
    """
    rows: List[Tuple[int, int, str, str, float, float]] = []
    machine: Dict[str, Any] = {}
    for json_path in json_paths:
        document = _load(json_path, "offload")
        machine = document.get("machine", machine)
        for case in document["cases"]:
            if case.get("probes", True):
                continue
            order = _strategy_order(list(OFFLOAD_STRATEGIES) + [case["strategy"]])
            rows.append(
                (
                    case["size_gib"],
                    order.index(case["strategy"]),
                    case["strategy"],
                    Path(json_path).name,
                    case["GBps"],
                    case["seconds"],
                )
            )
    rows.sort(key=lambda row: (row[0], row[1], row[3]))
    figure, axes = _figure_and_axes(ax, (8.0, 0.9 + 0.32 * len(rows)))
    positions = list(range(len(rows)))[::-1]
    bars = axes.barh(
        positions,
        [row[4] for row in rows],
        color=[OFFLOAD_STRATEGIES.get(row[2], "#999999") for row in rows],
    )
    axes.bar_label(
        bars, labels=[f"{row[4]:.1f} GB/s, {row[5]:.1f} s" for row in rows], fontsize=7, padding=3
    )
    axes.set_yticks(positions)
    axes.set_yticklabels([f"{row[0]} GiB  {row[2]}  ({row[3]})" for row in rows], fontsize=7)
    axes.set_xlabel("GB/s (W / seconds of the move)")
    axes.set_xlim(0, max((row[4] for row in rows), default=1.0) * 1.3)
    axes.set_title(
        f"Speed of the offload, unprobed runs ({machine.get('gpu', '?')}, "
        f"{machine.get('cpus', '?')} CPUs)",
        fontsize=9,
    )
    if isinstance(figure, Figure):
        figure.tight_layout()
    return figure


def plot_fast_path_ceilings(
    json_path: Union[str, Path], ax: Optional[Union[Axes, Figure]] = None
) -> FigureBase:
    """Draw the GB/s of each candidate copy path, one group per tensor size.

    Args:
        json_path: A file written by ``benchmarks/offload/fast_path_ceilings.py``.
        ax: Axes, or a figure to add one to; a new pyplot figure if omitted.

    Returns:
        The figure (or subfigure) drawn into.
    """
    document = _load(json_path, None)
    speeds: Dict[str, Dict[str, float]] = document["GBps"]
    paths = list(speeds)
    sizes: List[str] = []
    for per_size in speeds.values():
        sizes.extend(size for size in per_size if size not in sizes)
    value = {
        (f"{size} tensors", path): per_size[size]
        for path, per_size in speeds.items()
        for size in per_size
    }
    texts = {key: f"{speed:.1f}" for key, speed in value.items()}
    figure, axes = _figure_and_axes(ax, (7.0, 3.6))
    _grouped_bars(axes, [f"{size} tensors" for size in sizes], paths, value, texts)
    axes.set_ylabel("GB/s")
    axes.set_ylim(0, max(value.values(), default=1.0) * 1.25)
    machine = document.get("machine", {})
    axes.set_title(
        f"Copy paths from GPU into new host memory ({machine.get('gpu', '?')}, "
        f"torch {machine.get('torch', '?')})",
        fontsize=9,
    )
    axes.legend(fontsize=7)
    if isinstance(figure, Figure):
        figure.tight_layout()
    return figure
