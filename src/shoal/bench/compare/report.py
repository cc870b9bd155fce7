"""What a comparison shows and keeps: tables per message size, the figure, the results file.

:func:`print_tables` prints one rich table per size; :func:`make_figure` turns the
summaries into :mod:`shoal.bench.plot` curves (values, and ratios to the baseline);
:func:`results_document` is ``compare.json``: the configuration, the order run, every
sample and every summary, enough for a later analysis to start from the samples.
"""

from __future__ import annotations

import datetime as _dt
import platform
from typing import TYPE_CHECKING, Any, Sequence

from .analysis import Collected, Trial
from .plan import ORDER, Target
from .trial import UNITS

if TYPE_CHECKING:
    from matplotlib.figure import Figure
    from rich.console import Console

    from ..stats import Summary

__all__ = ["SCHEMA", "print_tables", "make_figure", "results_document", "now"]

SCHEMA = "shoal.bench.compare/1"


def _size(n: int) -> str:
    for unit, scale in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale and n % scale == 0:
            return f"{n // scale} {unit}"
    return f"{n} B"


def _num(x: float) -> str:
    if abs(x) >= 100:
        return f"{x:,.0f}"
    return f"{x:.2f}" if abs(x) >= 1 else f"{x:.3f}"


def _p(p: float | None) -> str:
    if p is None:
        return "—"
    return "<0.0001" if p < 1e-4 else f"{p:.4f}"


def print_tables(console: "Console", summaries: Sequence["Summary"], unit: str, baseline: str) -> None:
    """One table per message size, targets in the order given on the command line."""
    from rich import box
    from rich.table import Table

    by_size: dict[int, list[Summary]] = {}
    for s in summaries:
        by_size.setdefault(s.size, []).append(s)
    better = "lower" if UNITS[unit] else "higher"
    for size, rows in by_size.items():
        table = Table(title=f"size {_size(size)}", title_justify="left", box=box.SIMPLE_HEAD, show_edge=False)
        table.add_column("target")
        table.add_column(f"median {unit}", justify="right")
        table.add_column("95% CI", justify="right")
        table.add_column(f"÷ {baseline}", justify="right")
        table.add_column("95% CI", justify="right")
        table.add_column("p≠", justify="right")
        table.add_column("p faster", justify="right")
        for s in rows:
            ratio = "—" if s.ratio is None else f"{s.ratio:.2f}x"
            rci = "—" if s.ratio_ci is None else f"{s.ratio_ci.low:.2f}–{s.ratio_ci.high:.2f}"
            style = "bold" if s.target == baseline else None
            table.add_row(
                s.target, _num(s.median), f"{_num(s.ci.low)}–{_num(s.ci.high)}",
                ratio, rci, _p(s.p_differs), _p(s.p_faster), style=style,
            )
        console.print(table)
        console.print()
    console.print(
        f"[dim]{unit}: {better} is better. ÷ {baseline}: target median / {baseline} median with a bootstrap "
        f"95% CI. p≠: two-sided Mann–Whitney U vs {baseline}; p faster: one-sided, small = faster.[/dim]"
    )


def make_figure(summaries: Sequence["Summary"], *, unit: str, baseline: str, title: str) -> "Figure":
    """The comparison figure: curves with CIs, and ratios to the baseline below."""
    from .. import plot

    curves: list[plot.Curve] = []
    ratios: list[plot.Curve] = []
    for label in dict.fromkeys(s.target for s in summaries):
        mine = [s for s in summaries if s.target == label]
        curves.append(plot.Curve(
            label, [s.size for s in mine], [s.median for s in mine],
            [s.ci.low for s in mine], [s.ci.high for s in mine],
        ))
        pts = [(s.size, s.ratio, s.ratio_ci) for s in mine if s.ratio is not None and s.ratio_ci is not None]
        if pts:
            ratios.append(plot.Curve(
                label, [p[0] for p in pts], [p[1] for p in pts], [p[2].low for p in pts], [p[2].high for p in pts],
            ))
    return plot.curves_figure(curves, unit=unit, title=title, ratios=ratios, baseline=baseline)


def _environment() -> dict[str, str]:
    from ...version import __version__

    return {
        "shoal": __version__,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "hostname": platform.node(),
    }


def results_document(
    *,
    argv: Sequence[str],
    targets: Sequence[Target],
    baseline: str,
    plan: Sequence[Sequence[Target]],
    trials: Sequence[Trial],
    data: Collected,
    summaries: Sequence["Summary"],
    notes: Sequence[str],
    seed: int,
    resamples: int,
    options: Sequence[str],
    started: str,
) -> dict[str, Any]:
    """Everything a later analysis needs: configuration, the order run, samples, summary."""
    return {
        "schema": SCHEMA,
        "test": data.test,
        "unit": data.unit,
        "lower_is_better": data.lower_is_better,
        "pes": data.pes,
        "buffer": data.buffer,
        "targets": [t.label for t in targets],
        "baseline": baseline,
        "trials": len(plan),
        "seed": seed,
        "order": ORDER,
        "rounds": [[t.label for t in order] for order in plan],
        "micro_options": list(options),
        "confidence": 0.95,
        "bootstrap": {"method": "percentile", "resamples": resamples, "seed": seed},
        "command": ["shoal", "bench", "compare", *argv],
        "environment": _environment(),
        "started": started,
        "finished": now(),
        "runs": [
            {"round": t.round, "position": t.position, "target": t.target.label, "wall_s": round(t.wall_s, 3)}
            for t in trials
        ],
        "samples": [
            {"round": t.round, "target": t.target.label, "size": row.size, "value": row.value,
             "iterations": row.iterations}
            for t in trials for row in t.result.rows
        ],
        "summary": [s.to_dict() for s in summaries],
        "notes": list(notes),
    }


def now() -> str:
    """The current UTC time, ISO 8601 to the second (the record's timestamps)."""
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
