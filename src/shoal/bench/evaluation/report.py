"""``shoal bench report results.csv [-o DIR]``: tables, figures and an HTML report.

Reads a results file of ``shoal bench experiment FILE.toml``, prints the table per
configuration × target, and writes into DIR (default ``<results>-report/``) one PNG
per app × configuration and ``report.html``, which holds everything (figures as
base64): the tables (:mod:`.analysis`), the machine (``shoal info`` as recorded by the
experiment in ``<results>.machine.json``, else this machine now, said so), the software
versions and the exact commands. Exit code 2 for a file it cannot use.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Sequence

from . import results as results_file
from .analysis import cells, describe, fmt, pairwise, strong_scaling, weak_scaling
from .figures import step_figures
from .html import page
from .runner import machine_path, machine_record
from .spec import ExperimentError

__all__ = ["main", "write_report"]

_PROG = "shoal bench report"


def _unit(metric: str) -> tuple[float, str]:
    return (1e3, "ms") if metric.endswith("per_step") or metric.startswith("time") else (1.0, "")


def write_report(source: Path, out_dir: Path, *, metric: str | None = None, confidence: float = 0.99,
                 n_resamples: int = 9999) -> Path:
    """Analyse ``source`` into ``out_dir``; the HTML file's path. ExperimentError if unusable."""
    res = results_file.load(source)
    if not res.header:
        raise ExperimentError(f"{source}: no such results file, or it is empty")
    metrics = {row.get("metric", "") for row in res.rows} - {""}
    metric = metric or (metrics.pop() if len(metrics) == 1 else "time_per_step")
    results_file.check_columns(res, source, metric)
    if not res.rows:
        raise ExperimentError(f"{source}: a header but no rows; run the experiment first")
    try:
        all_cells = cells(res.rows, metric)
    except ExperimentError as exc:
        raise ExperimentError(f"{source}: {exc}") from None
    described = describe(all_cells, confidence=confidence, n_resamples=n_resamples)
    scaling = strong_scaling(all_cells, confidence=confidence, n_resamples=n_resamples) + \
        weak_scaling(all_cells, confidence=confidence, n_resamples=n_resamples)
    scale, unit = _unit(metric)
    units = {row.get("unit", "") for row in res.rows} - {""}
    if not unit and len(units) == 1:  # a micro-benchmark's value: µs or MB/s, as recorded
        unit = units.pop()
    figures = step_figures(described, metric, scale=scale, unit=unit or "as recorded")
    out_dir.mkdir(parents=True, exist_ok=True)
    for f in figures:
        (out_dir / f.name).write_bytes(f.png)
    meta_file = machine_path(source)
    if meta_file.exists():
        meta = json.loads(meta_file.read_text())
        note = f"As recorded by the experiment ({meta_file.name}, {meta.get('recorded', '')}, " \
               f"{meta.get('cores', '?')} available cores)."
    else:
        meta = machine_record()
        note = f"The results file has no {meta_file.name}: this is the machine the report was made on, now."
    commands = list(dict.fromkeys(row.get("command", "") for row in res.rows if row.get("command")))
    text = page(f"shoal bench report: {source.name}", metric, unit or "as recorded", scale, confidence, described,
                pairwise(all_cells), scaling, figures, str(meta.get("shoal_info", "")), note,
                dict(meta.get("versions", {})), commands, str(source))
    html_path = out_dir / "report.html"
    html_path.write_text(text)
    pct = f"{confidence * 100:g}%"
    print(f"{metric} ({unit}): median [{pct} CI], mean [{pct} CI] per configuration and target")
    for d in described:
        flag = "  (over-subscribed: not performance)" if d.cell.oversubscribed else ""
        print(f"  {d.cell.app} {d.cell.configuration} pes={d.cell.pes} {d.cell.target:<14} "
              f"{fmt(d.median, scale)} {fmt(d.median_ci, scale)}  mean {fmt(d.mean, scale)} "
              f"{fmt(d.mean_ci, scale)}{flag}")
    return html_path


def main(argv: Sequence[str]) -> int:
    p = argparse.ArgumentParser(prog=_PROG, description="tables, figures and an HTML report of a results file")
    p.add_argument("results", type=Path, help="a results CSV of `shoal bench experiment FILE.toml`")
    p.add_argument("-o", "--out", type=Path, default=None, help="folder for the figures and report.html "
                   "(default <results>-report)")
    p.add_argument("--metric", default=None, help="the column analysed (default: the file's metric column)")
    p.add_argument("--confidence", type=float, default=0.99, help="confidence of the intervals (0.99)")
    ns = p.parse_args(argv)
    if not 0 < ns.confidence < 1:
        p.error(f"--confidence {ns.confidence}: give a number between 0 and 1")
    out_dir = ns.out or ns.results.with_name(ns.results.stem + "-report")
    try:
        path = write_report(ns.results, out_dir, metric=ns.metric, confidence=ns.confidence)
    except ExperimentError as exc:
        print(f"{_PROG}: {exc}", file=sys.stderr)
        return 2
    print(f"report: {path}")
    return 0
