"""Plots of the benchmark results in ``benchmarks/results/``, for the docs.

The docs draw their figures from the saved JSON files, never from numbers typed by hand, so a
rerun of a benchmark updates its plot. This module needs only matplotlib and the standard
library (no torch), so the docs build can import it; call it from matplotlib's plot
directive, for example::

    .. plot::

       from benchmarks import plots
       plots.plot_offload_run("benchmarks/results/offload_headline_timing.json")

Functions:

* :func:`plot_offload_run`: GB/s of every case of one offload run, coloured by strategy, with
  the run's copy ceiling and host limit drawn across;
* :func:`plot_host_heap`: RSS kept after a builder-like burst, per allocator setting.

Every plot draws horizontal bars, one per measured figure, with the figure written beside its
bar in the same units as the axis, and a legend that names each colour; within a plot no two
meanings share a colour (:data:`PALETTE`). Plots draw every case a result file holds, so new
cases need no change here.
"""

from __future__ import annotations

import json
import logging
import statistics
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

from matplotlib.axes import Axes
from matplotlib.figure import Figure, FigureBase

logger = logging.getLogger(__name__)

GiB = 1024**3
MiB = 1024**2

# One palette for every plot, in the order a plot hands its colours out: Paul Tol's colour-blind
# safe "muted" scheme and its pale grey, ten colours no two alike.
PALETTE = (
    "#332288",
    "#CC6677",
    "#117733",
    "#DDCC77",
    "#88CCEE",
    "#882255",
    "#44AA99",
    "#999933",
    "#AA4499",
    "#AAAAAA",
)

# Figures of the host-heap JSON that plot_host_heap can draw: key -> (axis label, scale).
HOST_HEAP_METRICS = {
    "kept_after_trim": ("RSS kept after burst 2 (GiB)", GiB),
    "first_kept_after_trim": ("RSS kept after burst 1 (GiB)", GiB),
    "kept_after_free": ("RSS kept after the free of burst 2, before any trim (GiB)", GiB),
    "burst_s": ("time of burst 1 (s)", 1.0),
    "warm_burst_s": ("time of burst 2 (s)", 1.0),
}

from benchmarks.readme_tables import current_overlay_sha256, machine_record, overlay_mark
from benchmarks.strategies import OFFLOAD_STRATEGIES

# Text size in points: a figure FIGURE_WIDTH inches wide shown across a 420 px phone screen
# still writes it about 13 px high.
FONT_SIZE = 12.5


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

        figure, axes = plt.subplots(figsize=figsize, layout="constrained")
        return figure, axes
    if isinstance(ax, Figure):
        return ax, ax.add_subplot()
    return ax.figure, ax


def _strategy_order(strategies: Sequence[str]) -> List[str]:
    """The strategies of a plot in the registry's order (``benchmarks/strategies.py``)."""
    known = [strategy.name for strategy in OFFLOAD_STRATEGIES if strategy.name in strategies]
    return known + sorted(set(strategies) - set(known))


def _significant(value: float) -> str:
    """A figure with three significant digits, so that small values do not read as 0.00."""
    if value == 0:
        return "0"
    return f"{value:.3g}" if abs(value) < 100 else f"{value:.0f}"


# Width of every plot, in inches: narrow enough that a phone shows it whole at a readable
# size (the docs fit it to the column), wide enough for the longest label above its bar.
FIGURE_WIDTH = 4.6
# Characters per line of a title or an axis label at that width.
TITLE_WIDTH = 40
# Height of one bar's row (its label above it), and of the title, axis and legend, in inches.
ROW_HEIGHT = 0.42
FRAME_HEIGHT = 1.6


def _bar_figure(
    ax: Optional[Union[Axes, Figure]],
    bars: Sequence[Bar],
    *,
    xlabel: str,
    title: str,
    legend: Sequence[Tuple[str, str]] = (),
    lines: Sequence[Tuple[str, float, str]] = (),
    log_scale: bool = False,
) -> FigureBase:
    """Horizontal bars from the top down, each with its label above it and its figure beside
    it; one legend entry per ``(name, colour)``, and per vertical line ``(name, x, style)``.

    Labels sit above the bars rather than left of the axis, so the figure stays narrow enough
    to read whole on a phone, however long the labels are. The legend sits outside the axis,
    where it hides no bar.
    """
    height = FRAME_HEIGHT + ROW_HEIGHT * len(bars) + 0.25 * (len(legend) + len(lines)) / 2
    figure, axes = _figure_and_axes(ax, (FIGURE_WIDTH, height))
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
        axes.set_xlim(0, max([largest * 1.6] + [x * 1.05 for _, x, _ in lines]))
    axes.set_title("\n".join(textwrap.wrap(title, TITLE_WIDTH)), fontsize=FONT_SIZE + 0.5)
    handles: List[Any] = []
    if legend:
        from matplotlib.patches import Patch

        handles += [Patch(color=colour, label=name) for name, colour in legend]
    for name, x, style in lines:
        handles.append(axes.axvline(x, color="black", linestyle=style, linewidth=1.2, label=name))
    if handles:
        figure.legend(
            handles=handles, fontsize=FONT_SIZE, loc="outside lower center", ncols=2, frameon=False
        )
    return figure


def _machine(document: Dict[str, Any], *keys: str) -> str:
    """The first of ``keys`` the file's machine record has (its ``provenance.host``, or the
    older ``machine`` field), e.g. ``_machine(document, "device", "gpu")``."""
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


# After the title of a plot whose run measured another overlay than the current one, or whose
# result file does not say which (the docs' pages explain it).
STALE_MARK = " \u2020"


def plot_offload_run(
    json_path: Union[str, Path], ax: Optional[Union[Axes, Figure]] = None
) -> FigureBase:
    """Draw the speed of every timed case of one offload run, one colour per strategy.

    One bar per case (the median where the run repeated it), grouped by model, with its GB/s
    and its fraction of the run's copy ceiling beside it; the run's copy ceiling and its host
    limit for four bytes of traffic per moved byte (a path through page-locked chunks) are
    drawn across as lines. Probed cases are skipped: the probes slow the move.

    Args:
        json_path: A timed file written by ``python -m benchmarks run offload``
            (``--timing-out``, or ``--no-probes``).
        ax: Axes, or a figure to add one to; a new pyplot figure if omitted.

    Returns:
        The figure (or subfigure) drawn into.
    """
    document = _load(json_path, "offload")
    cases: Dict[Tuple[int, str, str], List[Dict[str, Any]]] = {}
    for case in document["cases"]:
        if not case.get("probes", True):
            cases.setdefault((case["size_gib"], case["mix"], case["strategy"]), []).append(case)
    order = _strategy_order([strategy for _, _, strategy in cases])
    colours = {name: PALETTE[index % len(PALETTE)] for index, name in enumerate(order)}
    bars = []
    for (size, mix, strategy), runs in cases.items():
        speed = statistics.median(run["GBps"] for run in runs)
        share = statistics.median(run["fraction_of_copy_ceiling"] for run in runs)
        bars.append(
            Bar(
                f"{size} GiB {mix}" + (f" ({len(runs)} runs)" if len(runs) > 1 else ""),
                speed,
                f"{speed:.1f} GB/s, {share:.2f}",
                colours[strategy],
            )
        )
    lines = [("copy ceiling", document["copy_ceiling"]["GBps"], "--")]
    if "host_limit" in document:
        limit = document["host_limit"]["limit_GBps"]["4"]
        lines.append(("host limit (4 bytes of traffic)", limit, ":"))
    stale = "" if overlay_mark(document, current_overlay_sha256()).current else STALE_MARK
    title = (
        f"Offload speed per case, {_machine(document, 'device', 'gpu')}; beside each bar its "
        f"share of the copy ceiling{stale}"
    )
    legend = [(name, colours[name]) for name in order]
    return _bar_figure(
        ax, bars, xlabel="GB/s (model size / seconds of the move)", title=title,
        legend=legend, lines=lines,
    )  # fmt: skip
