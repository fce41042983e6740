"""From samples and phase marks to the compile benchmark's figures (pure: no torch, no GPU).

A case hands in the sampler's rows ``(t, host_bytes, gpu_bytes)``, the phase marks it made
while compiling (``(name, start, end)`` on the same monotonic clock), the values before the
compile and the model's size W. Out come the peaks above the values before (host, GPU, and
host + GPU at the same instant, the figure that runs out where both share one memory), the
phase that holds the host + GPU peak (the shortest mark around it), each phase's values at its
start and its peaks, and the timeline (bytes above the values before) thinned for a plot, every peak sample kept.
"""

from __future__ import annotations

from typing import Any, Dict, List, NamedTuple, Optional, Sequence, Tuple

Sample = Tuple[float, int, int]

# Points a timeline keeps for its plot; the samples that hold a peak are always kept.
TIMELINE_POINTS = 1500


class Mark(NamedTuple):
    """A span of the compile: an upstream function's call, from its start to its return."""

    name: str
    start: float
    end: float


def _at(samples: Sequence[Sample], t: float) -> Sample:
    """The last sample at or before ``t`` (the first one if none is)."""
    before = [s for s in samples if s[0] <= t]
    return before[-1] if before else samples[0]


def _peaks(rows: Sequence[Sample], host0: int, gpu0: int) -> Tuple[int, int, int]:
    """(host, GPU, host + GPU) peaks of ``rows`` above the values before, in bytes."""
    return (
        max(h for _, h, _ in rows) - host0,
        max(g for _, _, g in rows) - gpu0,
        max(h + g for _, h, g in rows) - host0 - gpu0,
    )


def analyse(
    samples: Sequence[Sample],
    marks: Sequence[Mark],
    *,
    before: Tuple[int, int],
    window: Tuple[float, float],
    weights_bytes: int,
) -> Dict[str, Any]:
    """The figures, phases and timeline of one compile (the module docstring says which).

    ``window`` is the compile's (start, end); samples outside it count for the timeline
    only. Raises ``ValueError`` when no sample falls inside the window.
    """
    host0, gpu0 = before
    start, end = window
    inside = [s for s in samples if start <= s[0] <= end]
    if not inside:
        raise ValueError("no memory sample fell inside the compile; sample more often")
    host_peak, gpu_peak, sum_peak = _peaks(inside, host0, gpu0)
    peak_t = max(inside, key=lambda s: s[1] + s[2])[0]
    holding = [m for m in marks if m.start <= peak_t <= m.end]
    peak_phase: Optional[str] = (
        min(holding, key=lambda m: m.end - m.start).name if holding else None
    )

    def w(value: int) -> float:
        return round(value / weights_bytes, 4)

    phases: List[Dict[str, Any]] = []
    for mark in sorted(marks, key=lambda m: (m.start, -m.end)):
        rows = [s for s in samples if mark.start <= s[0] <= mark.end] or [_at(samples, mark.end)]
        first = _at(samples, mark.start)
        peaks = _peaks(rows, host0, gpu0)
        phases.append(
            {
                "name": mark.name,
                "start_s": round(mark.start - start, 4),
                "end_s": round(mark.end - start, 4),
                "host_start_w": w(first[1] - host0),
                "gpu_start_w": w(first[2] - gpu0),
                "host_peak_w": w(peaks[0]),
                "gpu_peak_w": w(peaks[1]),
                "sum_peak_w": w(peaks[2]),
            }
        )
    step = max(1, -(-len(samples) // TIMELINE_POINTS))  # rounded up: at most the points
    kept = {i for i in range(0, len(samples), step)}
    kept |= {max(range(len(samples)), key=lambda i: samples[i][k]) for k in (1, 2)}
    kept.add(max(range(len(samples)), key=lambda i: samples[i][1] + samples[i][2]))
    chosen = [samples[i] for i in sorted(kept)]
    return {
        "figures": {
            "host_peak_w": w(host_peak),
            "gpu_peak_w": w(gpu_peak),
            "sum_peak_w": w(sum_peak),
            "host_peak_bytes": host_peak,
            "gpu_peak_bytes": gpu_peak,
            "sum_peak_bytes": sum_peak,
        },
        "peak_phase": peak_phase,
        "phases": phases,
        "timeline": {
            "t_s": [round(t - start, 4) for t, _, _ in chosen],
            "host_bytes": [h - host0 for _, h, _ in chosen],
            "gpu_bytes": [g - gpu0 for _, _, g in chosen],
        },
    }
