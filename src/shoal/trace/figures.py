"""The report's views as Plotly figures, one function each, from an :class:`Analysis`.

Projections' views, drawn by Plotly (interactive: zoom, pan, hover): the timeline,
usage profile, overview, time profile, communication, histograms and outliers. Each
function returns a figure or ``None`` where the trace lacks what the view needs (a
summary-mode trace has no slices for a timeline).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .analysis import Analysis, outliers, usage
from .reasons import reason_text
from .rounds import periods, spread
from .._runtime.trace_flows import pair

__all__ = ["timeline", "timeline_rows", "balance_view", "usage_profile", "overview", "time_profile",
           "communication", "histograms", "outlier_view", "MAX_SLICES", "MAX_ROWS", "MAX_SENDS", "PALETTE"]

#: the longest slices the timeline draws (a browser draws ~10^4 bars at ease, not 10^6)
MAX_SLICES = 20_000
#: the most PEs the timeline draws (one row each)
MAX_ROWS = 32
#: the largest sends the timeline marks (hidden until their legend entry is clicked)
MAX_SENDS = 5_000
#: colours of the entry methods, in order of total time
PALETTE = ["#2e9d5a", "#1f77b4", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22", "#7f7f7f",
           "#393b79", "#637939", "#8c6d31"]
KINDS = {"work": "#2e9d5a", "pack/unpack": "#d62728", "idle": "#c8c8c8", "runtime overhead": "#ff9f1c"}


def _go() -> Any:
    import plotly.graph_objects as go

    return go


def _layout(fig: Any, title: str, height: int = 360, **kw: Any) -> Any:
    fig.update_layout(title={"text": title, "x": 0.0, "font": {"size": 15}}, height=height,
                      margin={"l": 70, "r": 20, "t": 50, "b": 45}, template="plotly_white", **kw)
    return fig


def _colors(an: Analysis) -> dict[int, str]:
    totals = an.work.sum(axis=(0, 2))
    return {int(m): PALETTE[i % len(PALETTE)] for i, m in enumerate(np.argsort(-totals))}


def timeline_rows(an: Analysis) -> list[int]:
    """The rows the timeline shows: all up to :data:`MAX_ROWS`; past it the busiest and
    the least busy PE, the outliers, and PEs evenly spread over the rest."""
    n = len(an.rows)
    if n <= MAX_ROWS:
        return list(range(n))
    work = usage(an)["work"]
    chosen = {int(np.argmax(work)), int(np.argmin(work))}
    chosen |= {o["row"] for o in outliers(an, k=MAX_ROWS // 4)}
    for r in np.linspace(0, n - 1, MAX_ROWS).astype(int):
        if len(chosen) >= MAX_ROWS:
            break
        chosen.add(int(r))
    return sorted(chosen)


def timeline(an: Analysis) -> tuple[Any, str] | None:
    """Per PE, a bar per entry-method run and idle period; rounds, migrations, marks on top.
    With a sentence on what was left out (slices beyond :data:`MAX_SLICES`, the shortest;
    PEs beyond :data:`MAX_ROWS`)."""
    if an.summary_mode or not len(an.slice_dur):
        return None
    go = _go()
    fig = go.Figure()
    rows = timeline_rows(an)
    shown = np.isin(an.slice_row, rows)
    order = np.flatnonzero(shown)[np.argsort(-an.slice_dur[shown], kind="stable")]
    keep = order[:MAX_SLICES]
    dropped = len(order) - len(keep)
    note = f" The {MAX_SLICES:,} longest runs are drawn; {dropped:,} shorter ones are left out." if dropped else ""
    if len(rows) < len(an.rows):
        note += (f" {len(rows)} PEs of {len(an.rows)} are drawn: the busiest and the least busy, the outliers "
                 "and PEs spread evenly over the rest.")
    colors = _colors(an)
    for m in sorted(set(an.slice_method[keep].tolist()), key=lambda m: list(colors).index(m)):
        sel = keep[an.slice_method[keep] == m]
        fig.add_trace(go.Bar(
            y=[an.rows[r] for r in an.slice_row[sel]], x=an.slice_dur[sel] / 1e3, base=an.slice_start[sel] / 1e3,
            orientation="h", name=an.methods[m], marker={"color": colors[m], "line": {"width": 0}},
            customdata=np.stack([[an.slice_element[i] or "—" for i in sel], an.slice_dur[sel],
                                 [_cause_text(an, i) for i in sel]], axis=1),
            hovertemplate=f"<b>{an.methods[m]}</b><br>element %{{customdata[0]}}<br>start %{{base:.3f}} ms"
                          "<br>duration %{customdata[1]:.1f} µs<br>%{customdata[2]}<extra>%{y}</extra>"))
    idle_shown = np.flatnonzero(np.isin(an.idle_row, rows))
    idle = idle_shown[np.argsort(-an.idle_dur[idle_shown], kind="stable")][:MAX_SLICES]
    if len(idle):
        fig.add_trace(go.Bar(y=[an.rows[r] for r in an.idle_row[idle]], x=an.idle_dur[idle] / 1e3,
                             base=an.idle_start[idle] / 1e3, orientation="h", name="idle", customdata=an.idle_dur[idle],
                             marker={"color": KINDS["idle"], "line": {"width": 0}},
                             hovertemplate="idle %{customdata:.1f} µs<extra>%{y}</extra>"))
    fig.add_trace(go.Bar(x=[None], y=[None], orientation="h", name="white: the runtime's own work",
                         marker={"color": "white", "line": {"width": 1, "color": "#999"}}, hoverinfo="skip"))
    sends = np.flatnonzero(np.isin(an.send_row, rows))
    sends = sends[np.argsort(-an.send_bytes[sends], kind="stable")][:MAX_SENDS]
    if len(sends):
        fig.add_trace(go.Scatter(x=an.send_time[sends] / 1e3, y=[an.rows[r] for r in an.send_row[sends]],
                                 mode="markers", name="send", marker={"symbol": "line-ns-open", "size": 10,
                                                                       "color": "#444"},
                                 customdata=np.stack([an.send_to[sends], an.send_bytes[sends]], axis=1),
                                 hovertemplate="send to PE %{customdata[0]}: %{customdata[1]:,.0f} bytes"
                                               "<extra>%{y}</extra>", visible="legendonly"))
    xs, ys = _arrows(an, keep, set(rows))
    if xs:
        fig.add_trace(go.Scatter(x=xs, y=ys, mode="lines", name="message (send → run)",
                                 line={"color": "#2ca02c", "width": 1}, hoverinfo="skip"))
    _marks(fig, an, set(rows))
    fig.update_yaxes(autorange="reversed", type="category", categoryorder="array",
                     categoryarray=[an.rows[r] for r in rows])
    fig.update_xaxes(title="time (ms)")
    _layout(fig, "Timeline: entry methods per PE (drag to zoom; double-click to reset)",
            height=230 + 40 * len(rows), barmode="overlay", bargap=0.25, hovermode="closest",
            legend={"orientation": "h", "x": 0, "y": -60 / (40 * len(rows) + 40), "yanchor": "top"})
    fig.update_layout(margin={"b": 110})
    return fig, note


def _cause_text(an: Analysis, i: int) -> str:
    """What a run's hover says of the message that caused it."""
    cause = an.slice_cause[i] if i < len(an.slice_cause) else None
    if cause is None:
        return "message: not recorded (same PE, held back, or no numbered send)"
    return f"message from {cause[0]}, sent at {cause[1] / 1e3:.3f} ms"


def _arrows(an: Analysis, keep: np.ndarray, rows: set[int]) -> tuple[list[float | None], list[str | None]]:
    """Line segments from each drawn run's send to the run's start (ms, row names), for
    runs whose sender's row is drawn too; at most :data:`MAX_SENDS`."""
    names = {an.rows[r] for r in rows}
    xs: list[float | None] = []
    ys: list[str | None] = []
    for i in keep:
        cause = an.slice_cause[i] if i < len(an.slice_cause) else None
        if cause is None or cause[0] not in names or an.slice_row[i] not in rows:
            continue
        xs += [cause[1] / 1e3, an.slice_start[i] / 1e3, None]
        ys += [cause[0], an.rows[an.slice_row[i]], None]
        if len(xs) >= 3 * MAX_SENDS:
            break
    return xs, ys


def _paths(an: Analysis, rows: set[int]) -> tuple[list[float | None], list[str | None]]:
    """Line segments from each migration's departure to its arrival (ms, row names)."""
    out = [d for d in an.migrations if d.get("from") == an.pes[d["row"]] and d.get("to") != d.get("from")]
    into = [d for d in an.migrations if d.get("to") == an.pes[d["row"]] and d.get("to") != d.get("from")]
    key = [(float(d["ts"]), str(d.get("element")), d.get("from"), d.get("to")) for d in out]
    xs: list[float | None] = []
    ys: list[str | None] = []
    for i, j in pair(key, [(float(d["ts"]), str(d.get("element")), d.get("from"), d.get("to")) for d in into]):
        a, b = out[i], into[j]
        if a["row"] in rows and b["row"] in rows:
            xs += [(a["ts"] + a["dur"] / 2) / 1e3, (b["ts"] + b["dur"] / 2) / 1e3, None]
            ys += [an.rows[a["row"]], an.rows[b["row"]], None]
    return xs, ys


def _marks(fig: Any, an: Analysis, rows: set[int]) -> None:
    """Balancing rounds (blue bands), migrations (red ×, a line from departure to
    arrival) and other marks (★) on the timeline."""
    go = _go()
    xs, ys = _paths(an, rows)
    if xs:
        fig.add_trace(go.Scatter(x=xs[:3 * MAX_SENDS], y=ys[:3 * MAX_SENDS], mode="lines", name="migration path",
                                 line={"color": "#d62728", "width": 1, "dash": "dot"}, hoverinfo="skip"))
    for d in an.balances[:500]:
        fig.add_vrect(x0=d["ts"] / 1e3, x1=(d["ts"] + d["dur"]) / 1e3, fillcolor="#1f5fbf", opacity=0.15,
                      line_width=0, layer="below")
    groups = [("balancing round", an.balances, "diamond", "#1f5fbf",
               lambda d: f"balance {d.get('collection')} ({d.get('strategy')}): moved {d.get('moved')}"
               + (f"<br>{why}" if (why := reason_text(d)) else "")),
              ("migration", an.migrations, "x", "#d62728",
               lambda d: f"{d.get('element')}: PE {d.get('from')} → PE {d.get('to')}, {d.get('bytes')} bytes"),
              ("mark", an.marks, "star", "#000000", lambda d: f"{d.get('name')}")]
    for name, everything, symbol, color, text in groups:
        items = [d for d in everything if d["row"] in rows][:MAX_SENDS]  # a browser's share of markers
        if items:
            fig.add_trace(go.Scatter(x=[d["ts"] / 1e3 for d in items], y=[an.rows[d["row"]] for d in items],
                                     mode="markers", name=name, marker={"symbol": symbol, "size": 9, "color": color},
                                     text=[text(d) for d in items], hovertemplate="%{text}<extra>%{y}</extra>"))


def usage_profile(an: Analysis) -> Any:
    """Each PE's span split into work, pack/unpack, idle and runtime overhead (percent)."""
    go = _go()
    u = usage(an)
    span = np.maximum(u["span"], 1e-12)
    fig = go.Figure()
    for (label, color), key in zip(KINDS.items(), ("work", "pack", "idle", "overhead")):
        fig.add_trace(go.Bar(x=an.rows, y=100 * u[key] / span, name=label, marker_color=color,
                             customdata=u[key] / 1e3, hovertemplate=f"{label}: %{{y:.1f}}% (%{{customdata:.2f}} ms)"
                                                                    "<extra>%{x}</extra>"))
    fig.update_yaxes(title="% of the PE's span", range=[0, 100])
    return _layout(fig, "Usage profile: where each PE's time went", barmode="stack")


def overview(an: Analysis) -> Any:
    """A PE × time heat map of utilisation (time in entry methods / time)."""
    go = _go()
    util = 100 * an.busy / np.maximum(an.covered, 1e-12)
    util[an.covered <= 0] = np.nan
    mid = (an.edges[:-1] + an.edges[1:]) / 2e3
    fig = go.Figure(go.Heatmap(z=util, x=mid, y=an.rows, zmin=0, zmax=100, colorscale="Viridis",
                               colorbar={"title": "% busy"},
                               hovertemplate="%{y}, %{x:.1f} ms: %{z:.0f}% busy<extra></extra>"))
    fig.update_yaxes(autorange="reversed", type="category")
    fig.update_xaxes(title="time (ms)")
    return _layout(fig, "Overview: utilisation per PE over time", height=160 + 30 * min(len(an.rows), 30))


def time_profile(an: Analysis) -> Any:
    """Time in each entry method over time, summed over the PEs (in PEs busy)."""
    go = _go()
    mid = (an.edges[:-1] + an.edges[1:]) / 2e3
    per = an.work.sum(axis=0) / max(an.width, 1e-12)
    colors = _colors(an)
    fig = go.Figure()
    for m in colors:
        fig.add_trace(go.Scatter(x=mid, y=per[m], name=an.methods[m], stackgroup="one", mode="lines",
                                 line={"width": 0.5, "color": colors[m]},
                                 hovertemplate=f"{an.methods[m]}: %{{y:.2f}} PEs busy<extra></extra>"))
    fig.add_trace(go.Scatter(x=mid, y=an.idle.sum(axis=0) / max(an.width, 1e-12), name="idle", stackgroup="one",
                             mode="lines", line={"width": 0.5, "color": KINDS["idle"]}))
    fig.update_yaxes(title="PEs (time per bin / bin)")
    fig.update_xaxes(title="time (ms)")
    return _layout(fig, "Time profile: entry methods over time", hovermode="x unified")


def communication(an: Analysis) -> Any | None:
    """Messages and bytes from each PE to each PE, and bytes sent over time."""
    if not an.comm_count.any() and not an.sent_bytes.any():
        return None
    from plotly.subplots import make_subplots

    go = _go()
    fig = make_subplots(rows=1, cols=3, column_widths=[0.27, 0.27, 0.46], horizontal_spacing=0.08,
                        subplot_titles=("messages, PE → PE", "bytes, PE → PE", "bytes sent over time"))
    for col, (z, what) in enumerate(((an.comm_count, "messages"), (an.comm_bytes, "bytes")), start=1):
        fig.add_trace(go.Heatmap(z=z, x=an.rows, y=an.rows, colorscale="Blues", showscale=False,
                                 hovertemplate=f"%{{y}} → %{{x}}: %{{z:,.0f}} {what}<extra></extra>"), row=1, col=col)
        fig.update_xaxes(title="to", type="category", row=1, col=col)
        fig.update_yaxes(title="from", type="category", autorange="reversed", row=1, col=col)
    mid = (an.edges[:-1] + an.edges[1:]) / 2e3
    for r, label in enumerate(an.rows[:16]):
        fig.add_trace(go.Scatter(x=mid, y=an.sent_bytes[r], name=f"{label} sent", stackgroup="sent", mode="lines",
                                 hovertemplate=f"{label}: %{{y:,.0f}} bytes<extra></extra>"), row=1, col=3)
    fig.update_xaxes(title="time (ms)", row=1, col=3)
    return _layout(fig, "Communication", height=380, showlegend=False)


def histograms(an: Analysis) -> Any | None:
    """How long each entry method's runs take (log-spaced bins of duration)."""
    if an.summary_mode or not len(an.slice_dur):
        return None
    go = _go()
    d = np.maximum(an.slice_dur, 0.01)
    edges = np.logspace(np.log10(d.min()), np.log10(d.max() * 1.001 + 1e-9), 41)
    mids = np.sqrt(edges[:-1] * edges[1:])
    colors = _colors(an)
    fig = go.Figure()
    for m in list(colors)[:8]:
        counts = np.histogram(d[an.slice_method == m], edges)[0]
        if counts.any():  # steps, not bars: Plotly sizes bars linearly, so on a log axis they vanish
            fig.add_trace(go.Scatter(x=mids, y=counts, name=an.methods[m], mode="lines", line_shape="hvh",
                                     fill="tozeroy", line={"color": colors[m]},
                                     hovertemplate=f"{an.methods[m]}: %{{y}} runs of ~%{{x:.3g}} µs<extra></extra>"))
    fig.update_xaxes(type="log", title="duration (µs)")
    fig.update_yaxes(title="runs")
    return _layout(fig, "Histograms: durations of entry-method runs", hovermode="closest")


def outlier_view(an: Analysis) -> Any | None:
    """The PEs least like the others, their usage beside the average PE's."""
    found = outliers(an, k=min(5, max(len(an.rows) - 1, 0)))
    if not found:
        return None
    go = _go()
    u = usage(an)
    span = np.maximum(u["span"], 1e-12)
    avg = {k: float((u[k] / span).mean()) for k in ("work", "pack", "idle", "overhead")}
    names = ["average PE"] + [f"{o['name']} ({100 * o['distance']:.0f} points off" +
                              (f", z {o['score']:.1f})" if len(an.rows) >= 3 else ")") for o in found]
    fig = go.Figure()
    for (label, color), key in zip(KINDS.items(), ("work", "pack", "idle", "overhead")):
        fig.add_trace(go.Bar(x=names, y=[100 * avg[key]] + [100 * o[key] for o in found], name=label,
                             marker_color=color, hovertemplate=f"{label}: %{{y:.1f}}%<extra>%{{x}}</extra>"))
    fig.update_yaxes(title="% of span", range=[0, 100])
    return _layout(fig, "Outliers: the PEs least like the average PE", barmode="stack")


def balance_view(an: Analysis) -> Any | None:
    """Around each balancing round: each PE's busy share of every period between rounds,
    and the load of each element in each period (coloured by the PE it ran on)."""
    found = periods(an)
    if not found:
        return None
    from plotly.subplots import make_subplots

    go = _go()
    labels = ["before round 1"] + [f"after round {k}" for k in range(1, len(found))]
    labels = [f"{lab}<br>(spread {spread(p.work):.2f})" for lab, p in zip(labels, found)]
    elements = any(p.elements for p in found)  # a summary-mode trace has none: the PEs' bars alone
    titles = ("each PE's busy share of the period", "each element's load in the period")[:2 if elements else 1]
    fig = make_subplots(rows=1, cols=len(titles), column_widths=[0.45, 0.55] if elements else None,
                        horizontal_spacing=0.08, subplot_titles=titles)
    shown = list(range(min(len(an.rows), 16)))
    for r in shown:
        fig.add_trace(go.Bar(x=labels, y=[100 * p.work[r] / max(p.end - p.start, 1e-12) for p in found],
                             name=an.rows[r], marker_color=PALETTE[r % len(PALETTE)], legendgroup=an.rows[r],
                             hovertemplate=f"{an.rows[r]}: %{{y:.0f}}% busy<extra>%{{x}}</extra>"), row=1, col=1)
    for k, (label, p) in enumerate(zip(labels, found)):
        items = sorted(p.elements.items(), key=lambda kv: -kv[1][0])[:3000]
        if not items:
            continue
        rows = np.array([v[1] for _, v in items])
        jitter = k + (np.arange(len(items)) % 41 - 20) / 60
        fig.add_trace(go.Scatter(x=jitter, y=[v[0] / 1e3 for _, v in items], mode="markers", showlegend=False,
                                 marker={"size": 6, "color": [PALETTE[r % len(PALETTE)] for r in rows]},
                                 text=[f"{name} on {an.rows[r]}" for (name, _), r in zip(items, rows)],
                                 hovertemplate="%{text}: %{y:.2f} ms<extra></extra>"), row=1, col=2)
    fig.update_yaxes(title="% busy", range=[0, 100], row=1, col=1)
    if elements:
        fig.update_xaxes(tickvals=list(range(len(labels))), ticktext=labels, row=1, col=2)
        fig.update_yaxes(title="ms in entry methods", row=1, col=2)
    return _layout(fig, "Balancing: the load between rounds (spread: the busiest PE's work over the mean)",
                   height=420, barmode="group")
