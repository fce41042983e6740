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

Every plot draws horizontal bars, one per measured figure, with the figure written beside its
bar in the same units as the axis, and one palette (:data:`PALETTE`) for all of them. Plots
draw every case a result file holds, so new cases need no change here.
"""

from __future__ import annotations

import json
import logging
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

from matplotlib.axes import Axes
from matplotlib.figure import Figure, FigureBase

logger = logging.getLogger(__name__)

GiB = 1024**3
MiB = 1024**2

# One palette for every plot (colour-blind-safe, distinct in greyscale by lightness).
PALETTE = ("#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3", "#937860", "#da8bc3", "#8c8c8c")

# Figures of the host-heap JSON that plot_host_heap can draw: key -> (axis label, scale).
HOST_HEAP_METRICS = {
    "kept_after_trim": ("RSS kept after burst 2 (GiB)", GiB),
    "first_kept_after_trim": ("RSS kept after burst 1 (GiB)", GiB),
    "kept_after_free": ("RSS kept after the free of burst 2, before any trim (GiB)", GiB),
    "burst_s": ("time of burst 1 (s)", 1.0),
    "warm_burst_s": ("time of burst 2 (s)", 1.0),
}

# Colours of the offload strategies, in the registry's order (benchmarks/strategies.py): the
# README's headline strategies first, each with a colour of its own.
sys.path.insert(0, str(Path(__file__).resolve().parent))
from strategies import OFFLOAD_STRATEGIES as _REGISTRY  # noqa: E402

_HEADLINE_COLOURS = (PALETTE[3], PALETTE[1], PALETTE[0])
_OTHER_COLOURS = tuple(colour for colour in PALETTE if colour not in _HEADLINE_COLOURS)
OFFLOAD_STRATEGIES = {
    strategy.name: _HEADLINE_COLOURS[index]
    for index, strategy in enumerate(s for s in _REGISTRY if s.headline)
}
OFFLOAD_STRATEGIES.update(
    (strategy.name, _OTHER_COLOURS[index % len(_OTHER_COLOURS)])
    for index, strategy in enumerate(s for s in _REGISTRY if not s.headline)
)

FONT_SIZE = 9.5


@dataclass(frozen=True)
class Bar:
    """One horizontal bar: its label on the y axis, length, text beside it, and colour."""

    label: str
    value: float
    text: str
    colour: str


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


def _colour(name: str, known: Dict[str, str], order: Sequence[str]) -> str:
    """``known[name]``, or the palette's colour for ``name``'s place in ``order``."""
    return known.get(name) or PALETTE[list(order).index(name) % len(PALETTE)]


def _strategy_order(strategies: Sequence[str]) -> List[str]:
    known = [name for name in OFFLOAD_STRATEGIES if name in strategies]
    return known + sorted(set(strategies) - set(known))


def _significant(value: float) -> str:
    """A figure with three significant digits, so that small values do not read as 0.00."""
    if value == 0:
        return "0"
    return f"{value:.3g}" if abs(value) < 100 else f"{value:.0f}"


# Width of every plot, in inches: narrow enough that a phone shows it whole at a readable
# size (the docs fit it to the column), wide enough for the longest label above its bar.
FIGURE_WIDTH = 5.0
# Characters per line of a title or an axis label at that width.
TITLE_WIDTH = 58


def _bar_figure(
    ax: Optional[Union[Axes, Figure]],
    bars: Sequence[Bar],
    *,
    xlabel: str,
    title: str,
    legend: Sequence[Tuple[str, str]] = (),
    log_scale: bool = False,
) -> FigureBase:
    """Horizontal bars from the top down, each with its label above it and its figure beside
    it; one legend entry per ``(name, colour)``.

    Labels sit above the bars rather than left of the axis, so the figure stays narrow enough
    to read whole on a phone, however long the labels are.
    """
    figure, axes = _figure_and_axes(ax, (FIGURE_WIDTH, 1.3 + 0.42 * len(bars)))
    positions = [float(index) for index in range(len(bars))][::-1]
    drawn = axes.barh(
        positions, [bar.value for bar in bars], color=[bar.colour for bar in bars], height=0.45
    )
    axes.bar_label(drawn, labels=[bar.text for bar in bars], fontsize=FONT_SIZE, padding=3)
    for position, bar in zip(positions, bars):
        axes.annotate(
            bar.label,
            (0, position + 0.25),
            xycoords=("axes fraction", "data"),
            xytext=(3, 0),
            textcoords="offset points",
            fontsize=FONT_SIZE,
            va="bottom",
        )
    axes.set_yticks([])
    axes.set_ylim(-0.6, len(bars) - 0.1)
    axes.tick_params(axis="x", labelsize=FONT_SIZE)
    axes.set_xlabel("\n".join(textwrap.wrap(xlabel, TITLE_WIDTH)), fontsize=FONT_SIZE)
    largest = max((bar.value for bar in bars), default=1.0)
    if log_scale:
        axes.set_xscale("log")
        smallest = min((bar.value for bar in bars if bar.value > 0), default=largest)
        axes.set_xlim(smallest / 3, largest * 60)
    else:
        axes.set_xlim(0, largest * 1.6)
    axes.set_title("\n".join(textwrap.wrap(title, TITLE_WIDTH)), fontsize=FONT_SIZE + 0.5)
    if legend:
        from matplotlib.patches import Patch

        handles = [Patch(color=colour, label=name) for name, colour in legend]
        axes.legend(handles=handles, fontsize=FONT_SIZE, loc="lower right")
    if isinstance(figure, Figure):
        figure.tight_layout()
    return figure


def _machine(document: Dict[str, Any], *keys: str) -> str:
    """The first of ``keys`` the file's machine record has (its ``provenance.host``, or the
    older ``machine`` field), e.g. ``_machine(document, "device", "gpu")``."""
    from readme_tables import machine_record

    machine = machine_record(document)
    found = [str(machine[key]) for key in keys if machine.get(key) not in (None, "")]
    return found[0] if found else "?"


def plot_host_heap(
    json_path: Union[str, Path],
    ax: Optional[Union[Axes, Figure]] = None,
    *,
    metric: str = "kept_after_trim",
    log_scale: bool = False,
) -> FigureBase:
    """Draw one figure of ``host_heap.json`` per case and burst size, as horizontal bars.

    Each bar is the median over the repeats, one colour per burst size, with its figure
    written beside it to three significant digits, so that a case that keeps almost nothing
    still reads as a number rather than an invisible bar or "0.00".

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
    sizes = sorted({entry["burst_gib"] for entry in document["summary"]})
    colours = {size: PALETTE[index % len(PALETTE)] for index, size in enumerate(sizes)}
    bars = []
    for entry in document["summary"]:
        median = entry["median"].get(metric)
        if median is None:
            continue
        bars.append(
            Bar(
                f"{entry['case']}, {entry['burst_gib']:g} GiB",
                median / scale,
                f"{_significant(median / scale)} {'GiB' if scale == GiB else 's'}",
                colours[entry["burst_gib"]],
            )
        )
    repeats = document.get("settings", {}).get("repeats", "?")
    title = (
        f"Host heap after a builder-like burst ({_machine(document, 'cpu', 'cpu_model')}, "
        f"{_machine(document, 'cpus', 'cpu_cores')} CPUs, "
        f"glibc {_machine(document, 'glibc')}; median of {repeats})"
    )
    legend = [(f"{size:g} GiB burst", colours[size]) for size in sizes]
    logger.debug("plotted %s from %s", metric, json_path)
    return _bar_figure(ax, bars, xlabel=label, title=title, legend=legend, log_scale=log_scale)


# After the label of a bar whose run measured another overlay than the current one, or whose
# result file does not say which (the docs' pages explain it).
STALE_MARK = " \u2020"


def _marked(case: Dict[str, Any], document: Dict[str, Any]) -> Dict[str, Any]:
    """The case, flagged when its file does not name the current overlay."""
    from readme_tables import current_overlay_sha256, overlay_mark

    stale = not overlay_mark(document, current_overlay_sha256()).current
    return {**case, "_stale": stale}


def _offload_bars(
    cases: Sequence[Dict[str, Any]], value: Callable[[Dict[str, Any]], float], text: str
) -> List[Bar]:
    """One bar per case, grouped by model, strategies in :data:`OFFLOAD_STRATEGIES` order."""
    order = _strategy_order([case["strategy"] for case in cases])
    seen: Dict[Tuple[int, str, str], int] = {}
    bars = []
    ordered = sorted(
        cases, key=lambda case: (case["size_gib"], case["mix"], order.index(case["strategy"]))
    )
    for case in ordered:
        key = (case["size_gib"], case["mix"], case["strategy"])
        seen[key] = seen.get(key, 0) + 1
        repeats = sum(
            1 for other in cases if (other["size_gib"], other["mix"], other["strategy"]) == key
        )
        run = f" (run {seen[key]})" if repeats > 1 else ""
        stale = STALE_MARK if case.get("_stale") else ""
        bars.append(
            Bar(
                f"{case['size_gib']} GiB {case['mix']}, {case['strategy']}{run}{stale}",
                value(case),
                text.format(**case, overshoot_GiB=case.get("overshoot_bytes", 0) / GiB),
                _colour(case["strategy"], OFFLOAD_STRATEGIES, order),
            )
        )
    return bars


def plot_offload_overshoot(
    json_paths: Union[str, Path, Sequence[Union[str, Path]]],
    ax: Optional[Union[Axes, Figure]] = None,
) -> FigureBase:
    """Draw the offload's overshoot (host + GPU above the start) per model and strategy.

    One bar per probed case, grouped by model (size and tensor mix), its length in multiples
    of the model size W, with the overshoot in GiB and in W written beside it. Only the
    overshoot of a probed run means anything; unprobed cases are skipped.

    Args:
        json_paths: A file, or files, written by ``benchmarks/offload/run.py`` with its
            probes on; unprobed files among them add nothing.
        ax: Axes, or a figure to add one to; a new pyplot figure if omitted.

    Returns:
        The figure (or subfigure) drawn into.
    """
    paths = [json_paths] if isinstance(json_paths, (str, Path)) else list(json_paths)
    cases: List[Dict[str, Any]] = []
    document: Dict[str, Any] = {}
    for json_path in paths:
        loaded = _load(json_path, "offload")
        probed = [_marked(case, loaded) for case in loaded["cases"] if case.get("probes", True)]
        if probed:
            cases.extend(probed)
            document = loaded
    bars = _offload_bars(
        cases, lambda case: case["overshoot_W"], "{overshoot_GiB:.2f} GiB ({overshoot_W:.3f} W)"
    )
    title = (
        f"Host + GPU memory above the start of the offload ({_machine(document, 'device', 'gpu')})"
    )
    return _bar_figure(ax, bars, xlabel="overshoot (multiples of the model size W)", title=title)


def plot_offload_speed(
    json_paths: Sequence[Union[str, Path]], ax: Optional[Union[Axes, Figure]] = None
) -> FigureBase:
    """Draw the offload's speed (GB/s), one horizontal bar per unprobed case and run.

    A case measured in several files (a repeat) gets one bar per run, so the spread between
    runs stays visible. Probed cases are skipped: the probes run after every tensor
    operation and slow the move.

    Args:
        json_paths: Files written by ``benchmarks/offload/run.py --no-probes``; probed files
            among them add nothing.
        ax: Axes, or a figure to add one to; a new pyplot figure if omitted.

    Returns:
        The figure (or subfigure) drawn into.
    """
    cases: List[Dict[str, Any]] = []
    document: Dict[str, Any] = {}
    for json_path in json_paths:
        loaded = _load(json_path, "offload")
        unprobed = [
            _marked(case, loaded) for case in loaded["cases"] if not case.get("probes", True)
        ]
        if unprobed:
            cases.extend(unprobed)
            document = loaded
    bars = _offload_bars(cases, lambda case: case["GBps"], "{GBps:.2f} GB/s, {seconds:.1f} s")
    title = f"Speed of the offload, runs without probes ({_machine(document, 'device', 'gpu')})"
    return _bar_figure(ax, bars, xlabel="GB/s (model size W / seconds of the move)", title=title)


def plot_fast_path_ceilings(
    json_path: Union[str, Path], ax: Optional[Union[Axes, Figure]] = None
) -> FigureBase:
    """Draw the GB/s of each candidate copy path, one bar per path and tensor size.

    Args:
        json_path: A file written by ``benchmarks/offload/fast_path_ceilings.py``.
        ax: Axes, or a figure to add one to; a new pyplot figure if omitted.

    Returns:
        The figure (or subfigure) drawn into.
    """
    document = _load(json_path, None)
    speeds: Dict[str, Dict[str, float]] = document["GBps"]
    paths = list(speeds)
    bars = [
        Bar(f"{path}, {size} tensors", speed, f"{speed:.1f} GB/s", PALETTE[index % len(PALETTE)])
        for index, (path, per_size) in enumerate(speeds.items())
        for size, speed in per_size.items()
    ]
    title = f"Copy paths from GPU into new host memory ({_machine(document, 'device', 'gpu')})"
    logger.debug("plotted %d copy paths from %s", len(paths), json_path)
    return _bar_figure(ax, bars, xlabel="GB/s", title=title)
