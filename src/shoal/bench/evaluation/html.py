"""The self-contained HTML report: tables, figures as base64 PNG, machine, versions, commands."""

from __future__ import annotations

import base64
import html
from typing import Any, Sequence

from .analysis import WEAK_TOLERANCE, Described, Pair, ScalingRow, fmt
from .figures import Drawn

__all__ = ["page"]

_CSS = """body{font-family:sans-serif;max-width:70em;margin:2em auto;color:#222}
table{border-collapse:collapse;margin:1em 0;font-size:90%}td,th{border:1px solid #bbb;padding:.2em .5em}
th{background:#eee}td.n{text-align:right;font-family:monospace}tr.over td{background:#fde8e8}
pre{background:#f6f6f6;padding:.6em;overflow-x:auto;font-size:85%}img{max-width:100%}"""
_OVER = "over-subscribed: not performance"


def _table(cls: str, head: Sequence[str], rows: Sequence[tuple[bool, Sequence[Any]]]) -> str:
    out = [f'<table class="{cls}"><thead><tr>' + "".join(f"<th>{html.escape(h)}</th>" for h in head)
           + "</tr></thead><tbody>"]
    for over, cols in rows:
        tds = "".join(f'<td class="n">{html.escape(str(c))}</td>' if i >= 4 else f"<td>{html.escape(str(c))}</td>"
                      for i, c in enumerate(cols))
        out.append(f'<tr class="over">{tds}</tr>' if over else f"<tr>{tds}</tr>")
    return "".join(out) + "</tbody></table>"


def page(title: str, metric: str, unit: str, scale: float, confidence: float, described: Sequence[Described],
         pairs: Sequence[Pair], scaling: Sequence[ScalingRow], figures: Sequence[Drawn], machine: str,
         machine_note: str, versions: dict[str, str], commands: Sequence[str], source: str) -> str:
    """The report as one HTML document."""
    pct = f"{confidence * 100:g}%"
    over_mark = lambda over: _OVER if over else ""  # noqa: E731
    parts = [f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
             f"<style>{_CSS}</style></head><body><h1>{html.escape(title)}</h1>",
             f"<p>Results: <code>{html.escape(source)}</code>. Metric: <code>{html.escape(metric)}</code> in "
             f"{unit}. Intervals are percentile-bootstrap {pct} confidence intervals; p-values are two-sided "
             f"Mann–Whitney U. Rows shaded red ran more PEs than available cores ({_OVER}).</p>",
             "<h2>Per configuration and target</h2>"]
    parts.append(_table("summary", ["app", "configuration", "target", "note", "pes", "trials",
                                    f"median ({unit})", f"{pct} CI", f"mean ({unit})", f"{pct} CI",
                                    "ratio to baseline", f"{pct} CI"],
                        [(d.cell.oversubscribed, [d.cell.app, d.cell.configuration, d.cell.target,
                                                  over_mark(d.cell.oversubscribed), d.cell.pes, d.n,
                                                  fmt(d.median, scale), fmt(d.median_ci, scale),
                                                  fmt(d.mean, scale), fmt(d.mean_ci, scale),
                                                  fmt(d.ratio), fmt(d.ratio_ci)]) for d in described]))
    over_keys = {d.cell.config_key for d in described if d.cell.oversubscribed}
    parts.append("<h2>Pairs of targets</h2>")
    if pairs:
        parts.append(_table("pairs", ["app", "configuration", "A", "B", "pes", "median A / median B",
                                      "p (Mann–Whitney U)"],
                            [((p.app, p.configuration, p.pes) in over_keys,
                              [p.app, p.configuration, p.a, p.b, p.pes, fmt(p.ratio), fmt(p.pvalue)])
                             for p in pairs]))
    else:
        parts.append("<p>One target per configuration: no pairs.</p>")
    for kind, rule in (("strong", "the same configuration on more PEs; efficiency = p0·T(p0) / (p·T(p)), "
                                  "p0 the fewest PEs of the series"),
                       ("weak", "configurations that differ only in size and pes with the same grid points per "
                                f"PE (within {WEAK_TOLERANCE:.0%}; size N is N² points for jacobi2d and pic, N³ "
                                "for jacobi3d); efficiency = T(p0) / T(p)")):
        rows = [r for r in scaling if r.kind == kind]
        parts.append(f"<h2>{kind.capitalize()} scaling</h2><p>Rule: {html.escape(rule)}.</p>")
        if not rows:
            parts.append(f"<p>No {kind}-scaling series in these results.</p>")
            continue
        parts.append(_table(kind, ["series", "configuration", "target", "note", "pes", f"median ({unit})",
                                   "parallel efficiency", f"{pct} CI"],
                            [(r.cell.oversubscribed, [r.series, r.cell.configuration, r.cell.target,
                                                      over_mark(r.cell.oversubscribed), r.cell.pes,
                                                      fmt(r.median, scale), fmt(r.efficiency),
                                                      fmt(r.efficiency_ci)]) for r in rows]))
    parts.append("<h2>Figures</h2>")
    if not figures:
        parts.append("<p>No figure: every configuration ran over-subscribed.</p>")
    for f in figures:
        data = base64.b64encode(f.png).decode("ascii")
        parts.append(f"<figure><img alt='{html.escape(f.title)}' src='data:image/png;base64,{data}'>"
                     f"<figcaption>{html.escape(f.title)}: time per step against PEs; solid computation, "
                     f"hatched communication and waiting; error bars the {pct} CI of the median."
                     + (f" Not drawn: pes {', '.join(map(str, f.left_out))} ({_OVER})." if f.left_out else "")
                     + "</figcaption></figure>")
    parts.append(f"<h2>Machine</h2><p>{html.escape(machine_note)}</p><pre>{html.escape(machine)}</pre>")
    parts.append(_table("versions", ["software", "version"], [(False, [k, v]) for k, v in versions.items()]))
    parts.append("<h2>Commands</h2><pre>" + "\n".join(html.escape(c) for c in commands) + "</pre>")
    parts.append("</body></html>")
    return "\n".join(parts)
