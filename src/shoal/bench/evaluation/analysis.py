"""Tables of a results file: pure functions from CSV rows to records.

* per configuration × target: median and mean, each with a bootstrap CI (99% by
  default; :func:`shoal.bench.stats.median_ci` and :func:`~shoal.bench.stats.mean_ci`),
  and the ratio of medians to the baseline target
  with its CI (:func:`shoal.bench.stats.ratio_ci`);
* per configuration, a two-sided Mann–Whitney U p-value for each pair of targets
  (:func:`shoal.bench.stats.mann_whitney`);
* scaling, where pes varies. **Strong**: the same configuration (size included) on
  several pes; efficiency ``p0·T(p0) / (p·T(p))``, ``p0`` the fewest pes. **Weak**: the
  configurations that differ only in ``size`` and ``pes`` and have the same grid points
  per PE (within 2%); a size ``N`` means ``N^d`` points (``d`` = 2 for jacobi2d and
  pic, 3 for jacobi3d), ``NxM`` means ``N·M``; efficiency ``T(p0) / T(p)``. The CI of
  an efficiency is the bootstrap CI of the ratio of medians, scaled alike.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from itertools import combinations
from typing import Any, Sequence

import numpy as np

from .. import stats
from .spec import ExperimentError

__all__ = ["Cell", "Described", "Pair", "ScalingRow", "cells", "describe", "pairwise", "points",
           "strong_scaling", "weak_scaling"]

#: dimensions of an app's ``--size N`` (N^d grid points)
DIMENSIONS = {"jacobi2d": 2, "jacobi3d": 3, "pic": 2}
#: relative tolerance of "the same points per PE" in a weak-scaling series
WEAK_TOLERANCE = 0.02


@dataclass(frozen=True, slots=True)
class Cell:
    """The trials of one configuration × target."""

    app: str
    configuration: str
    pes: int
    target: str
    oversubscribed: bool
    values: tuple[float, ...]  # the metric, one per trial
    compute: tuple[float, ...] | None = None
    comm: tuple[float, ...] | None = None
    baseline: str = ""

    @property
    def options(self) -> dict[str, str]:
        return dict(word.split("=", 1) for word in self.configuration.split() if "=" in word)

    @property
    def config_key(self) -> tuple[str, str, int]:
        return (self.app, self.configuration, self.pes)


@dataclass(frozen=True, slots=True)
class Described:
    cell: Cell
    n: int
    median: float
    median_ci: stats.Interval | None
    mean: float
    mean_ci: stats.Interval | None
    ratio: float | None = None
    ratio_ci: stats.Interval | None = None


@dataclass(frozen=True, slots=True)
class Pair:
    app: str
    configuration: str
    pes: int
    a: str
    b: str
    ratio: float  # median(a) / median(b)
    pvalue: float | None  # two-sided Mann–Whitney U; None with fewer than 2 trials


@dataclass(frozen=True, slots=True)
class ScalingRow:
    kind: str  # "strong" or "weak"
    series: str  # what stays fixed
    cell: Cell
    median: float
    efficiency: float
    efficiency_ci: stats.Interval | None


def _number(value: str, line: int, column: str) -> float:
    try:
        return float(value)
    except ValueError:
        raise ExperimentError(f"line {line}, column {column}: {value!r} is not a number") from None


def cells(rows: Sequence[dict[str, str]], metric: str) -> list[Cell]:
    """Group result rows by configuration × target (sorted by app, configuration, pes, target)."""
    groups: dict[tuple[str, str, int, str], list[tuple[int, dict[str, str]]]] = {}
    for line, row in enumerate(rows, start=2):
        try:
            pes = int(row["pes"])
        except ValueError:
            raise ExperimentError(f"line {line}, column pes: {row['pes']!r} is not a whole number") from None
        groups.setdefault((row["app"], row["configuration"], pes, row["target"]), []).append((line, row))
    out = []
    for (app, configuration, pes, target), members in groups.items():
        values = tuple(_number(r[metric], n, metric) for n, r in members)

        def column(name: str) -> tuple[float, ...] | None:
            if any(r.get(name, "") in ("", None) for _, r in members):
                return None
            return tuple(_number(r[name], n, name) for n, r in members)

        over = any(r.get("oversubscribed", "0") not in ("", "0", "False", "false") for _, r in members)
        out.append(Cell(app, configuration, pes, target, over, values, column("compute_per_step"),
                        column("comm_per_step"), members[0][1].get("baseline", "") or ""))
    return sorted(out, key=lambda c: (c.app, c.configuration, c.pes, c.target))


def describe(all_cells: Sequence[Cell], *, confidence: float = 0.99,
             n_resamples: int = stats.DEFAULT_RESAMPLES) -> list[Described]:
    """Median and mean with CIs per cell, and the ratio to the baseline target's cell."""
    by_key = {(c.config_key, c.target): c for c in all_cells}
    out = []
    for c in all_cells:
        enough = len(c.values) >= stats.MIN_SAMPLES
        mci = stats.median_ci(c.values, confidence=confidence, n_resamples=n_resamples) if enough else None
        aci = stats.mean_ci(c.values, confidence=confidence, n_resamples=n_resamples) if enough else None
        ratio = rci = None
        base = by_key.get((c.config_key, c.baseline))
        if base is not None and base is not c and stats.median(base.values) > 0:
            ratio = stats.ratio_of_medians(c.values, base.values)
            if enough and len(base.values) >= stats.MIN_SAMPLES and min(base.values) > 0:
                rci = stats.ratio_ci(c.values, base.values, confidence=confidence, n_resamples=n_resamples)
        out.append(Described(c, len(c.values), stats.median(c.values), mci, float(np.mean(c.values)), aci,
                             ratio, rci))
    return out


def pairwise(all_cells: Sequence[Cell]) -> list[Pair]:
    """A two-sided Mann–Whitney U p-value for each pair of targets of each configuration."""
    by_config: dict[tuple[str, str, int], list[Cell]] = {}
    for c in all_cells:
        by_config.setdefault(c.config_key, []).append(c)
    out = []
    for (app, configuration, pes), members in by_config.items():
        for a, b in combinations(members, 2):
            p = None
            if min(len(a.values), len(b.values)) >= stats.MIN_SAMPLES:
                p = stats.mann_whitney(a.values, b.values, "two-sided").pvalue
            mb = stats.median(b.values)
            out.append(Pair(app, configuration, pes, a.target, b.target,
                            stats.median(a.values) / mb if mb else math.nan, p))
    return out


def points(app: str, size: str) -> float | None:
    """Grid points of ``size`` (``N`` or ``NxM…``) for ``app``; None if it is not a size."""
    try:
        dims = [int(part) for part in size.lower().split("x")]
    except ValueError:
        return None
    if len(dims) == 1:
        return float(dims[0]) ** DIMENSIONS.get(app, 1)
    return float(math.prod(dims))


def _series(kind: str, label: str, members: list[Cell], weak: bool, confidence: float,
            n_resamples: int) -> list[ScalingRow]:
    members = sorted(members, key=lambda c: c.pes)
    c0 = members[0]
    out = []
    for c in members:
        factor = 1.0 if weak else c0.pes / c.pes
        eff = factor * stats.ratio_of_medians(c0.values, c.values)
        ci = None
        if min(len(c0.values), len(c.values)) >= stats.MIN_SAMPLES and min(c.values) > 0:
            r = stats.ratio_ci(c0.values, c.values, confidence=confidence, n_resamples=n_resamples)
            ci = stats.Interval(factor * r.low, factor * r.high)
        out.append(ScalingRow(kind, label, c, stats.median(c.values), eff, ci))
    return out


def strong_scaling(all_cells: Sequence[Cell], *, confidence: float = 0.99,
                   n_resamples: int = stats.DEFAULT_RESAMPLES) -> list[ScalingRow]:
    """Strong-scaling series: one configuration and target on two or more pes."""
    groups: dict[tuple[str, str, str], list[Cell]] = {}
    for c in all_cells:
        groups.setdefault((c.app, c.target, c.configuration), []).append(c)
    out = []
    for (app, target, configuration), members in groups.items():
        if len({c.pes for c in members}) >= 2:
            out += _series("strong", f"{app} {configuration}, {target}", members, False, confidence, n_resamples)
    return out


def weak_scaling(all_cells: Sequence[Cell], *, confidence: float = 0.99,
                 n_resamples: int = stats.DEFAULT_RESAMPLES) -> list[ScalingRow]:
    """Weak-scaling series: the same points per PE on two or more pes, size growing."""
    groups: dict[tuple[str, str, str], list[tuple[float, Cell]]] = {}
    for c in all_cells:
        opts = c.options
        work = points(c.app, opts["size"]) if "size" in opts else None
        if work is None:
            continue
        rest = " ".join(f"{k}={v}" for k, v in opts.items() if k != "size")
        groups.setdefault((c.app, c.target, rest), []).append((work / c.pes, c))
    out = []
    for (app, target, rest), members in groups.items():
        used: set[int] = set()
        for i, (per_pe, _) in enumerate(members):
            if i in used:
                continue
            series = [j for j, (q, _) in enumerate(members) if j not in used
                      and abs(q - per_pe) <= WEAK_TOLERANCE * per_pe]
            chosen = [members[j][1] for j in series]
            if len({c.pes for c in chosen}) >= 2 and len({c.options["size"] for c in chosen}) >= 2:
                used.update(series)
                label = f"{app} {rest} {per_pe:.6g} points per PE, {target}".replace("  ", " ")
                out += _series("weak", label, chosen, True, confidence, n_resamples)
    return out


def fmt(value: Any, scale: float = 1.0) -> str:
    """A number with 4 significant digits (blank for None)."""
    if value is None:
        return ""
    if isinstance(value, stats.Interval):
        return f"[{value.low * scale:.4g}, {value.high * scale:.4g}]"
    return f"{value * scale:.4g}"
