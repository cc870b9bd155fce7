"""What waits: the scheduler queue and the futures over time, for the report's queue view.

A full trace carries each PE's queue as a ``PE n queued`` counter (``"ph": "C"``, the
longest queue per stretch of the run, see :mod:`shoal._runtime.trace_queue`) and each
future as an async slice (``"ph": "b"`` / ``"e"``, category ``future``); a summary-mode
trace carries both as bins (``otherData.shoal.summary.pes[].queue`` and ``.futures``).
:func:`waiting_series` puts either onto the report's grid of time bins: per PE and bin
the longest queue, the futures made and resolved, and the longest wait of those resolved
(µs). :func:`queue_view` draws them. Pure NumPy and Plotly, no I/O.
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from .._runtime.trace_futures import FUTURE
from .._runtime.tracing import TRACE_PID

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .analysis import Analysis

__all__ = ["waiting_series", "queue_view", "QUEUE_LINES"]

#: the most PEs drawn as a line each in the queue view (the ones with the longest queues)
QUEUE_LINES = 8


def _num(x: Any) -> float | None:
    return float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) and x == x else None


def _bin_of(edges: np.ndarray, ts: np.ndarray) -> np.ndarray:
    """The grid bin of each time (clipped to the grid)."""
    return np.clip(np.searchsorted(edges, ts, side="right") - 1, 0, len(edges) - 2)


def waiting_series(data: Mapping[str, Any], row_of_key: Mapping[tuple[Any, Any], int],
                   summary: Mapping[str, Any] | None, edges: np.ndarray) -> dict[str, np.ndarray]:
    """Per row and bin of ``edges`` (µs, the file's times): ``queue`` (the longest queue),
    ``made`` and ``resolved`` (futures) and ``wait`` (the longest wait of a future
    resolved in the bin, µs). ``row_of_key``: (pid, tid) -> row."""
    n, bins = len(row_of_key), len(edges) - 1
    out = {k: np.zeros((n, bins)) for k in ("queue", "made", "resolved", "wait")}
    queue: dict[int, list[tuple[float, float]]] = {}
    begins: dict[tuple[Any, Any, Any], float] = {}
    ends: list[tuple[int, float, float]] = []
    for ev in data.get("traceEvents", ()):
        ph = ev.get("ph")
        if ph == "C":
            args = ev.get("args")
            row = row_of_key.get((ev.get("pid"), ev.get("tid")))
            ts = _num(ev.get("ts"))
            if row is None or ts is None or not isinstance(args, Mapping) or _num(args.get("queued")) is None:
                continue
            queue.setdefault(row, []).append((ts, float(args["queued"])))
        elif ph in ("b", "e") and ev.get("cat") == FUTURE:
            key = (ev.get("pid"), ev.get("tid"), ev.get("id"))
            ts = _num(ev.get("ts"))
            if ts is None or key[:2] not in row_of_key:
                continue
            if ph == "b":
                begins[key] = ts
            elif key in begins:
                ends.append((row_of_key[key[:2]], begins.pop(key), ts))
    for row, notes in queue.items():  # each note holds until the next
        notes.sort()
        when, value = np.array([t for t, _ in notes]), np.array([v for _, v in notes])
        q = out["queue"][row]
        np.maximum.at(q, _bin_of(edges, when), value)
        before = np.searchsorted(when, edges[:-1], side="right") - 1  # the note in force at each bin's start
        held = np.where(before >= 0, value[np.maximum(before, 0)], 0.0)
        np.maximum(q, held, out=q)
    if ends or begins:
        e = np.array(ends, float).reshape(-1, 3)
        rows = e[:, 0].astype(int)
        np.add.at(out["made"], (rows, _bin_of(edges, e[:, 1])), 1)
        np.add.at(out["resolved"], (rows, _bin_of(edges, e[:, 2])), 1)
        np.maximum.at(out["wait"], (rows, _bin_of(edges, e[:, 2])), e[:, 2] - e[:, 1])
        for (pid, tid, _), t0 in begins.items():  # made, never resolved
            out["made"][row_of_key[pid, tid], _bin_of(edges, np.array([t0]))[0]] += 1
    if summary is not None:
        _add_bins(summary, row_of_key, edges, out)
    return out


def _add_bins(summary: Mapping[str, Any], row_of_key: Mapping[tuple[Any, Any], int], edges: np.ndarray,
              out: dict[str, np.ndarray]) -> None:
    """Summary mode: each PE's queue and futures bins (of its own width) onto the grid."""
    from .analysis import _rebin

    for p in summary.get("pes", ()):
        r = row_of_key.get((TRACE_PID, p.get("tid"))) if isinstance(p, Mapping) else None
        if r is None:
            continue
        o, w = _num(p.get("origin")) or 0.0, _num(p.get("width")) or 0.0
        futures = p.get("futures") if isinstance(p.get("futures"), Mapping) else {}
        for key, values in (("queue", p.get("queue")), ("wait", futures.get("wait"))):
            if not values:
                continue
            v = np.asarray(values, float)
            starts = o + w * np.arange(v.size)
            for at in (starts, starts + w * 0.999999):  # a bin of the PE's may reach into two of the grid's
                np.maximum.at(out[key][r], _bin_of(edges, at), v)
        for key in ("made", "resolved"):
            if futures.get(key):
                out[key][r] += _rebin(futures[key], o, w, edges)


def queue_view(an: Analysis) -> Any | None:
    """The longest scheduler queue over time per PE (the :data:`QUEUE_LINES` PEs with the
    longest), and the futures made and resolved over time with the longest wait; None
    where the trace holds neither a queue nor a future."""
    if not (an.queue.any() or an.futures_made.any() or an.futures_resolved.any()):
        return None
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.12,
                        specs=[[{}], [{"secondary_y": True}]],
                        subplot_titles=("longest scheduler queue per bin (messages and coroutines waiting)",
                                        "futures made and resolved per bin, and the longest wait"))
    mid = (an.edges[:-1] + an.edges[1:]) / 2e3
    peaks = an.queue.max(axis=1) if an.queue.size else np.zeros(0)
    shown = [int(r) for r in np.argsort(-peaks, kind="stable")[:QUEUE_LINES] if peaks[r] > 0]
    for r in sorted(shown):
        fig.add_trace(go.Scatter(x=mid, y=an.queue[r], name=f"{an.rows[r]} queue", mode="lines",
                                 line={"shape": "hv", "width": 1.5},
                                 hovertemplate=f"{an.rows[r]}, %{{x:.1f}} ms: %{{y:.0f}} waiting<extra></extra>"),
                      row=1, col=1)
    if len(shown) < int((peaks > 0).sum()):
        fig.add_trace(go.Scatter(x=mid, y=an.queue.max(axis=0), name="any PE's longest", mode="lines",
                                 line={"shape": "hv", "width": 1, "dash": "dot", "color": "#555"}), row=1, col=1)
    made, resolved = an.futures_made.sum(axis=0), an.futures_resolved.sum(axis=0)
    if made.any() or resolved.any():
        fig.add_trace(go.Bar(x=mid, y=made, name="futures made", marker_color="#1f77b4",
                             hovertemplate="%{x:.1f} ms: %{y:.0f} made<extra></extra>"), row=2, col=1)
        fig.add_trace(go.Bar(x=mid, y=resolved, name="futures resolved", marker_color="#2e9d5a",
                             hovertemplate="%{x:.1f} ms: %{y:.0f} resolved<extra></extra>"), row=2, col=1)
        wait = an.future_wait.max(axis=0) / 1e3
        fig.add_trace(go.Scatter(x=mid, y=np.where(resolved > 0, wait, np.nan), name="longest wait (ms)",
                                 mode="markers+lines", line={"color": "#d62728", "width": 1},
                                 hovertemplate="%{x:.1f} ms: longest wait %{y:.3g} ms<extra></extra>"),
                      row=2, col=1, secondary_y=True)
        fig.update_yaxes(title="futures", row=2, col=1, secondary_y=False)
        fig.update_yaxes(title="wait (ms)", row=2, col=1, secondary_y=True, rangemode="tozero")
    fig.update_yaxes(title="waiting", row=1, col=1, rangemode="tozero")
    fig.update_xaxes(title="time (ms)", row=2, col=1)
    return fig.update_layout(title={"text": "Queue and futures: what waits on each PE", "x": 0.0,
                                    "font": {"size": 15}}, height=520, barmode="group",
                             margin={"l": 70, "r": 20, "t": 60, "b": 45}, template="plotly_white")
