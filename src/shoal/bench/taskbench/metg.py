"""METG: the minimum effective task granularity, computed as Task Bench's scripts do.

A sweep runs one graph at decreasing kernel iteration counts. For each count, the
runs (repeats) are pooled by their mean elapsed time (the reference; ``pool="median"``
or ``"min"`` resist runs slowed by other work on a shared machine), and

* task granularity = elapsed x cores / tasks (the wall time a core spends per task),
* efficiency = (FLOPs / elapsed) / peak FLOP/s.

METG(threshold) is the smallest granularity whose efficiency is at least the
threshold; when the next smaller granularity falls below the threshold the value is
interpolated linearly (in efficiency) to exactly the threshold between the two. This
is ``analyze`` of the reference's ``scripts/chart_metg.py``. A confidence interval
comes from resampling the repeats of every iteration count (bootstrap) and
recomputing METG.

Pure functions: the driver (:mod:`.metg_cli`) runs the jobs and hands the parsed
reports here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Sequence

import numpy as np

__all__ = ["Run", "Point", "Metg", "POOLS", "parse_reports", "curve", "metg", "metg_ci"]

#: how the repeats at one -iter are pooled: the reference's mean, or robust alternatives
#: for a shared machine (a run slowed by another job moves the mean, not the median)
POOLS: dict[str, Callable[[list[float]], Any]] = {"mean": np.mean, "median": np.median, "min": np.min}

_FIELDS = {
    "iterations": re.compile(r"^\s*Iterations: ([0-9]+)$", re.M),
    "steps": re.compile(r"^\s*Time Steps: ([0-9]+)$", re.M),
    "width": re.compile(r"^\s*Max Width: ([0-9]+)$", re.M),
    "tasks": re.compile(r"^\s*Total Tasks ([0-9]+)$", re.M),
    "flops": re.compile(r"^\s*Total FLOPs ([0-9]+)$", re.M),
    "elapsed": re.compile(r"^\s*Elapsed Time ([0-9.e+-]+) seconds$", re.M),
}


@dataclass(frozen=True, slots=True)
class Run:
    """One report: a graph (the first, when there are several) run once."""

    iterations: int
    steps: int
    width: int
    tasks: int
    flops: int
    elapsed: float


@dataclass(frozen=True, slots=True)
class Point:
    """One iteration count of a sweep, its repeats pooled."""

    iterations: int
    reps: int
    elapsed: float  # mean seconds
    granularity: float  # seconds of a core per task
    efficiency: float
    flops_per_second: float


@dataclass(frozen=True, slots=True)
class Metg:
    """METG in seconds, or ``None`` with the reason."""

    value: float | None
    status: str  # "ok", "never efficient" or "not crossed" (value is then an upper bound)


def parse_reports(text: str) -> list[Run]:
    """Every report in a log (the reference's or shoal's), in order."""
    runs = []
    for block in text.split("Running Task Benchmark")[1:]:
        found: dict[str, str] = {}
        for key, pattern in _FIELDS.items():
            m = pattern.search(block)
            if m is None:
                raise ValueError(f"a report in the log has no {key!r} line:\n{block[:500]}")
            found[key] = m.group(1)
        runs.append(Run(int(found["iterations"]), int(found["steps"]), int(found["width"]), int(found["tasks"]),
                        int(found["flops"]), float(found["elapsed"])))
    return runs


def curve(runs: Iterable[Run], peak_flops: float, cores: int, pool: str = "mean") -> list[Point]:
    """Pool ``runs`` by iteration count; the points from the largest count down."""
    combine = POOLS[pool]
    if peak_flops <= 0:
        raise ValueError(f"peak FLOP/s must be positive, got {peak_flops}")
    groups: dict[int, list[Run]] = {}
    for r in runs:
        groups.setdefault(r.iterations, []).append(r)
    points = []
    for iterations in sorted(groups, reverse=True):
        rs = groups[iterations]
        if len({(r.tasks, r.flops) for r in rs}) != 1:
            raise ValueError(f"runs at -iter {iterations} disagree on tasks or FLOPs: the graphs differ")
        elapsed = float(combine([r.elapsed for r in rs]))
        rate = rs[0].flops / elapsed
        points.append(Point(iterations, len(rs), elapsed, elapsed * cores / rs[0].tasks, rate / peak_flops, rate))
    return points


def metg(points: Sequence[Point], threshold: float = 0.5) -> Metg:
    """The reference's METG rule on a curve ordered from the largest iteration count."""
    eligible = [i for i, p in enumerate(points) if p.efficiency >= threshold]
    if not eligible:
        return Metg(None, "never efficient")
    best = min(eligible, key=lambda i: points[i].granularity)
    value = points[best].granularity
    if best + 1 < len(points) and points[best + 1].granularity < value:
        lo, hi = points[best + 1], points[best]
        value = float(np.interp(threshold, [lo.efficiency, hi.efficiency], [lo.granularity, hi.granularity]))
        return Metg(value, "ok")
    return Metg(value, "not crossed")


def metg_ci(
    runs: Sequence[Run],
    peak_flops: float,
    cores: int,
    threshold: float = 0.5,
    *,
    confidence: float = 0.95,
    n_resamples: int = 2000,
    seed: int = 0,
    pool: str = "mean",
) -> tuple[float, float] | None:
    """Percentile-bootstrap interval of METG: repeats resampled within each count."""
    groups: dict[int, list[Run]] = {}
    for r in runs:
        groups.setdefault(r.iterations, []).append(r)
    if all(len(g) < 2 for g in groups.values()):
        return None
    rng = np.random.default_rng(seed)
    values = []
    for _ in range(n_resamples):
        sample = [g[i] for g in groups.values() for i in rng.integers(0, len(g), len(g))]
        m = metg(curve(sample, peak_flops, cores, pool), threshold)
        if m.value is not None and m.status == "ok":
            values.append(m.value)
    if len(values) < n_resamples // 2:
        return None
    tail = (1 - confidence) / 2 * 100
    return float(np.percentile(values, tail)), float(np.percentile(values, 100 - tail))
