"""``shoal trace report out.json -o report.html``: one self-contained HTML page of every view.

The page holds Plotly's JavaScript inline (no server, no network: it opens from a laptop
after copying it from a cluster), the answers in words at the top
(:mod:`shoal.trace.findings`), then the views (:mod:`shoal.trace.figures`) each with a
line saying how to read it. Reading is bounded and forgiving (:mod:`shoal.trace.read`).
"""

from __future__ import annotations

import html
import os
from typing import Any, Callable, Collection

from ..errors import ShoalError
from .analysis import Analysis, analyze
from .figures import (balance_view, communication, histograms, outlier_view, overview, time_profile,
                            timeline, usage_profile)
from .findings import duration, findings
from .reasons import reason_text
from .read import MAX_BYTES, read_trace
from .waiting import queue_view

__all__ = ["write_report", "report_html", "VIEWS"]

_STYLE = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px auto;max-width:1200px;color:#222;
padding:0 16px}h1{font-size:22px}h2{font-size:18px;margin-top:28px;border-bottom:1px solid #ddd}
.words{background:#f4f8f4;border-left:4px solid #2e9d5a;padding:8px 16px}.note{background:#fff4e0;
border-left:4px solid #ff9f1c;padding:8px 16px}.how{color:#555;font-size:14px}table{border-collapse:collapse;
font-size:14px}td,th{padding:3px 10px;text-align:right}td:first-child,th:first-child{text-align:left}
tr:nth-child(even){background:#f6f6f6}td{white-space:nowrap}td:last-child{white-space:normal}
"""

_HOW = {
    "timeline": "One row per PE; a bar per entry-method run, coloured by method; grey is idle (waiting "
                "for messages), white the runtime's own work. Blue bands and ◆: balancing rounds; red ×: "
                "migrations, a dotted line from the PE each left to the PE it reached; ★: marks (checkpoints, "
                "restarts); click 'send' in the legend for the messages sent (to whom, bytes). Hover a bar for "
                "its element and duration; drag to zoom.",
    "usage": "Each PE's span split into work (entry methods), pack/unpack (migrating elements), idle (waiting "
             "for messages) and runtime overhead (scheduling, sending, reductions: the rest).",
    "overview": "Utilisation per PE over time: dark is idle, yellow is busy. A dark stripe is a PE waiting; a "
                "dark column is a phase where every PE waits (a barrier, a reduction, a balancing round).",
    "profile": "Time in each entry method, summed over the PEs, over time: the height is how many PEs are busy "
               "in it. Idle on top, so the total is the number of PEs.",
    "comm": "Messages and bytes sent from each PE (rows) to each PE (columns), and bytes sent over time. "
            "Only the Python path's sends are recorded, not those of the compiled per-message path (most "
            "entry-method calls between elements): the counts are a lower bound.",
    "queue": "What waits on each PE. Top: the longest scheduler queue in each time bin (messages sent to "
             "elements of the same PE, and coroutines ready to resume; a message from another PE runs as it "
             "arrives, so it never waits there), for the PEs with the longest. A tall, lasting queue is a PE "
             "handed more local work than it runs. Bottom: the futures made and resolved in each bin, over all "
             "PEs, and the longest wait of those resolved: a long wait is a reply that was slow to come.",
    "hist": "How long each entry method's runs take. A wide or two-humped histogram means uneven work.",
    "balance": "The run split at each balancing round: how busy each PE was in each period, and each element's "
               "load (time in its entry methods) in it, coloured by the PE it ran on. A round that helped evens "
               "the bars and moves the heavy elements' colours apart.",
    "outliers": "The PEs whose split of time is farthest from the average PE's (points: the distance between "
                "the two splits, in percentage points; z: standard deviations above the PEs' mean distance), as "
                "Projections' outlier analysis finds them.",
}


#: the page's parts, in order: ``shoal trace report --views`` picks some
VIEWS = ("words", "methods", "timeline", "usage", "overview", "profile", "comm", "queue", "hist", "outliers",
         "balance", "rounds")


def report_html(an: Analysis, title: str, views: Collection[str] = VIEWS) -> str:
    """The page for ``an``: the parts named in ``views`` (all of :data:`VIEWS` by default)."""
    from plotly.offline import get_plotlyjs

    unknown = sorted(set(views) - set(VIEWS))
    if unknown:
        raise ShoalError(f"unknown view {', '.join(unknown)}; the views are {', '.join(VIEWS)}")
    f = findings(an)
    parts = [f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
             f"<style>{_STYLE}</style><script>{get_plotlyjs()}</script></head><body>",
             f"<h1>Where the time goes: {html.escape(title)}</h1>"]
    for note in an.notes:
        parts.append(f"<p class='note'>{html.escape(note)}</p>")
    if "words" in views:
        parts.append("<div class='words' id='words'><h2>In words</h2>")
        parts += [f"<p>{html.escape(s)}</p>" for s in f.sentences]
        parts.append("<p><b>What would help:</b></p><ul>" + "".join(f"<li>{html.escape(a)}</li>" for a in f.advice)
                     + "</ul></div>")
    if "methods" in views:
        parts.append(_methods_table(f.top))
    makers: dict[str, Callable[[Analysis], Any]] = {
        "usage": usage_profile, "overview": overview, "profile": time_profile, "comm": communication,
        "queue": queue_view,
        "hist": histograms, "outliers": outlier_view, "balance": balance_view}
    for key in (v for v in VIEWS if v in views):
        how = _HOW.get(key, "")
        if key == "timeline":
            tl = timeline(an)
            if tl is None:
                if an.summary_mode:
                    parts.append("<p class='note'>Recorded in summary mode (time bins): the timeline, the "
                                 "histograms and the per-run details are not in the trace; the usage profile, "
                                 "overview, time profile, communication, the queue and futures and each PE's "
                                 "load between balancing rounds are.</p>")
                continue
            fig, note = tl
            how += note + (" Perfetto shows all of them." if note else "")
        elif key in makers:
            fig = makers[key](an)
            if fig is None:
                continue
        else:
            continue
        parts.append(f"<section id='view-{key}'><p class='how'>{html.escape(how)}</p>")
        parts.append(fig.to_html(include_plotlyjs=False, full_html=False, div_id=f"plot-{key}",
                                 config={"displaylogo": False, "responsive": True}))
        parts.append("</section>")
    if "rounds" in views:
        parts.append(_rounds_table(an))
    parts.append("</body></html>")
    return "\n".join(parts)


def _methods_table(top: list[dict[str, Any]]) -> str:
    if not top:
        return ""
    rows = "".join(f"<tr><td>{html.escape(str(d['name']))}</td><td>{d['calls']:,}</td><td>{duration(d['total'])}"
                   f"</td><td>{duration(d['mean'])}</td><td>{'—' if d['max'] != d['max'] else duration(d['max'])}"
                   "</td></tr>" for d in top)
    return ("<h2>Entry methods by total time</h2><table class='methods'><tr><th>entry method</th><th>calls</th>"
            f"<th>total</th><th>mean</th><th>max</th></tr>{rows}</table>")


def _rounds_table(an: Analysis) -> str:
    if not an.balances:
        return ""
    rows = []
    for d in sorted(an.balances, key=lambda d: d["ts"]):
        moves = [m for m in an.migrations if d["ts"] <= m["ts"] <= d["ts"] + d["dur"] + 1e3 and
                 m.get("from") == an.pes[m["row"]]]
        what = ", ".join(f"{m.get('element')} {m.get('from')}→{m.get('to')}" for m in moves[:8])
        more = f" and {len(moves) - 8} more" if len(moves) > 8 else ""
        rows.append(f"<tr><td>{duration(d['ts'])}</td><td>{html.escape(an.rows[d['row']])}</td>"
                    f"<td>{html.escape(str(d.get('collection')))}</td><td>{html.escape(str(d.get('strategy')))}</td>"
                    f"<td>{d.get('moved')}</td><td>{duration(d['dur'])}</td>"
                    f"<td style='text-align:left'>{html.escape(reason_text(d) or '—')}</td>"
                    f"<td style='text-align:left'>{html.escape(what + more)}</td></tr>")
    return ("<h2>Balancing rounds</h2><p class='how'>Each round: when it ran, what the strategy decided and why "
            "(the imbalance it found: the busiest PE's time over the average, less 1; the threshold under which "
            "auto and refine move nothing; the plan auto took, with the time it estimated the plan saves a period "
            "and costs to move; the imbalance predicted after), the elements it moved and how long the round "
            "took on the PE.</p><table class='rounds'><tr><th>at</th><th>PE</th><th>collection</th>"
            "<th>strategy</th><th>moved</th><th>took</th><th>why</th><th>moves</th></tr>"
            + "".join(rows) + "</table>")


def write_report(trace: str | os.PathLike[str], out: str | os.PathLike[str], *, max_bytes: int = MAX_BYTES,
                 views: Collection[str] = VIEWS) -> Analysis:
    """Read ``trace``, write the report to ``out``; the analysis (for a one-line summary).
    A bad trace or an unwritable ``out`` raises :class:`shoal.ShoalError`."""
    import numpy as np

    loaded = read_trace(trace, max_bytes=max_bytes)
    with np.errstate(all="ignore"):  # a hand-made trace's absurd times give inf, not warnings
        an = analyze(loaded.data, notes=loaded.notes)
        if not an.rows:
            raise ShoalError(f"{os.fspath(trace)!r} holds no events of any PE: nothing to report")
        page = report_html(an, os.path.basename(os.fspath(trace)), views)
    target = os.fspath(out)
    try:
        with open(target, "w", encoding="utf-8") as f:
            f.write(page)
    except OSError as exc:
        raise ShoalError(f"cannot write the report to {target!r}: {exc.strerror or exc}") from None
    return an
