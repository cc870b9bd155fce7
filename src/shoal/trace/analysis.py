"""Where the time went, as arrays: the computations behind ``shoal trace report``.

:func:`analyze` turns a loaded trace (a full one, or one recorded in summary mode with
time bins) into an :class:`Analysis`: one row per PE, a common grid of time bins, and
per row and bin the time in each entry method (work), in packing and unpacking migrating
elements (pack), waiting for messages (idle) and the rest of the PE's span (the runtime's
own work: overhead). Every view of the report (usage profile, overview, time profile) is
a sum over these arrays, so a summary-mode trace draws them as a full one does; a full
trace also keeps its slices (timeline, histograms) and sends (communication).
Pure NumPy, no I/O: the report's numbers are unit-tested on synthetic traces.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np

from ..errors import ShoalError
from .._runtime.tracing import BALANCE, ENTRY, IDLE, MARK, MESSAGE, MIGRATION, SEND, TRACE_PID
from .waiting import waiting_series

__all__ = ["Analysis", "analyze", "coverage", "usage", "method_totals", "outliers", "BINS"]

#: time bins of the common grid for a full trace
BINS = 200


@dataclass
class Analysis:
    """A trace as arrays; times in µs from the trace's first instant, bins of ``edges``."""

    rows: list[str]
    pes: list[int | None]
    #: [row, 2]: each row's first and last instant
    spans: np.ndarray
    edges: np.ndarray
    methods: list[str]
    #: [row, method, bin] µs in each entry method (nested calls counted in each)
    work: np.ndarray
    #: [row, bin] µs waiting, packing/unpacking migrations, inside the row's span
    idle: np.ndarray
    pack: np.ndarray
    covered: np.ndarray
    #: [row, method, bin] calls started
    calls: np.ndarray
    #: [row, row] messages and bytes sent from one PE to another; [row, bin] bytes sent
    comm_count: np.ndarray
    comm_bytes: np.ndarray
    sent_bytes: np.ndarray
    #: full traces: slices (row, method index, start µs, duration µs, element) of entry methods
    slice_row: np.ndarray = field(default_factory=lambda: np.zeros(0, int))
    slice_method: np.ndarray = field(default_factory=lambda: np.zeros(0, int))
    slice_start: np.ndarray = field(default_factory=lambda: np.zeros(0))
    slice_dur: np.ndarray = field(default_factory=lambda: np.zeros(0))
    slice_element: list[str] = field(default_factory=list)
    #: full traces: each slice's message, where a send caused it: (sending row's name, send µs)
    slice_cause: list[tuple[str, float] | None] = field(default_factory=list)
    #: full traces: sends (row, time µs, destination PE or -1, bytes) of the Python path
    send_row: np.ndarray = field(default_factory=lambda: np.zeros(0, int))
    send_time: np.ndarray = field(default_factory=lambda: np.zeros(0))
    send_to: np.ndarray = field(default_factory=lambda: np.zeros(0, int))
    send_bytes: np.ndarray = field(default_factory=lambda: np.zeros(0))
    #: full traces: idle periods (row, start µs, duration µs)
    idle_row: np.ndarray = field(default_factory=lambda: np.zeros(0, int))
    idle_start: np.ndarray = field(default_factory=lambda: np.zeros(0))
    idle_dur: np.ndarray = field(default_factory=lambda: np.zeros(0))
    #: dicts with row, ts, dur (µs) and the event's args
    migrations: list[dict[str, Any]] = field(default_factory=list)
    balances: list[dict[str, Any]] = field(default_factory=list)
    marks: list[dict[str, Any]] = field(default_factory=list)
    #: [row] µs of CPU time the PE's process had over its span (nan: not recorded)
    cpu: np.ndarray = field(default_factory=lambda: np.zeros(0))
    #: [row, bin]: the longest scheduler queue; futures made and resolved; the longest
    #: wait (µs) of a future resolved in the bin (:mod:`shoal.trace.waiting`)
    queue: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))
    futures_made: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))
    futures_resolved: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))
    future_wait: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))
    #: True: recorded in summary mode (bins only: no timeline, histograms or per-send data)
    summary_mode: bool = False
    notes: list[str] = field(default_factory=list)

    @property
    def overhead(self) -> np.ndarray:
        """[row, bin] µs of the span in none of work, idle and pack: the runtime's own work."""
        return np.maximum(0.0, self.covered - self.busy - self.idle - self.pack)

    @property
    def busy(self) -> np.ndarray:
        """[row, bin] µs in entry methods (nested calls once, as far as bins can tell)."""
        return np.minimum(self.work.sum(axis=1), self.covered)

    @property
    def width(self) -> float:
        """One bin, µs."""
        return float(self.edges[1] - self.edges[0]) if len(self.edges) > 1 else 0.0


def coverage(starts: np.ndarray, ends: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """Per bin of ``edges``, the time the intervals ``[starts, ends)`` cover (summed)."""
    a, b = np.sort(np.asarray(starts, float)), np.sort(np.asarray(ends, float))
    ca, cb = np.concatenate([[0.0], np.cumsum(a)]), np.concatenate([[0.0], np.cumsum(b)])
    na, nb = np.searchsorted(a, edges), np.searchsorted(b, edges)
    # G(e) = sum over a < e of (e - a) - sum over b < e of (e - b): the time covered before e
    g = edges * na - ca[na] - edges * nb + cb[nb]
    return np.diff(g)


def _rebin(values: Any, origin: float, width: float, edges: np.ndarray) -> np.ndarray:
    """Amounts per bin of a series (bins of ``width`` from ``origin``) spread onto ``edges``."""
    v = np.asarray(values, float)
    if v.size == 0:
        return np.zeros(len(edges) - 1)
    own = origin + width * np.arange(v.size + 1)
    cum = np.concatenate([[0.0], np.cumsum(v)])
    return np.diff(np.interp(edges, own, cum))


class _Rows:
    """(pid, tid) -> row number, with each row's name and PE."""

    def __init__(self) -> None:
        self.index: dict[tuple[Any, Any], int] = {}
        self.names: dict[tuple[Any, Any], str] = {}

    def __call__(self, ev: Mapping[str, Any]) -> int:
        key = (ev.get("pid"), ev.get("tid"))
        row = self.index.get(key)
        if row is None:
            row = self.index[key] = len(self.index)
        return row


def _num(x: Any) -> float:
    return float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) and x == x else 0.0


def analyze(data: Mapping[str, Any], *, bins: int = BINS, notes: list[str] | None = None) -> Analysis:
    """The arrays of a loaded trace (:func:`shoal.trace.read.read_trace`'s ``data``)."""
    rows = _Rows()
    names: list[str] = []
    name_ids: dict[str, int] = {}
    ent: list[tuple[int, int, float, float]] = []
    elements: list[str] = []
    caused: list[tuple[str, float] | None] = []
    idle: list[tuple[int, float, float]] = []
    sends: list[tuple[int, float, Any, float]] = []
    migr: list[dict[str, Any]] = []
    bal: list[dict[str, Any]] = []
    marks: list[dict[str, Any]] = []
    for ev in data.get("traceEvents", ()):
        ph = ev.get("ph")
        if ph == "M":
            if ev.get("name") == "thread_name" and isinstance(ev.get("args"), Mapping):
                rows(ev)
                rows.names[(ev.get("pid"), ev.get("tid"))] = str(ev["args"].get("name", ""))
            continue
        if ph not in ("X", "i", "I"):
            continue
        ts, cat = _num(ev.get("ts")), ev.get("cat")
        dur = max(0.0, _num(ev.get("dur"))) if ph == "X" else 0.0
        args = ev.get("args") if isinstance(ev.get("args"), Mapping) else {}
        row = rows(ev)
        if cat == MESSAGE:  # an arrow's send slice: its run names the sender (args.from)
            continue
        if ph == "X" and (cat == ENTRY or cat not in (IDLE, MIGRATION, BALANCE)):
            name = str(ev.get("name"))
            m = name_ids.get(name)
            if m is None:
                m = name_ids[name] = len(names)
                names.append(name)
            ent.append((row, m, ts, dur))
            elements.append(str(args.get("element", "")))
            sender = args.get("from")  # a message arrow's head (trace_messages.py)
            caused.append((str(sender), _num(args.get("sent"))) if sender is not None else None)
        elif cat == IDLE:
            idle.append((row, ts, ts + dur))
        elif cat == MIGRATION:
            migr.append({"row": row, "ts": ts, "dur": dur, **args})
        elif cat == BALANCE:
            bal.append({"row": row, "ts": ts, "dur": dur, **args})
        elif cat == SEND:
            sends.append((row, ts, args.get("to"), _num(args.get("bytes"))))
        elif cat == MARK or ph != "X":
            marks.append({"row": row, "ts": ts, "name": str(ev.get("name")), **args})
    other = data.get("otherData") if isinstance(data.get("otherData"), Mapping) else {}
    own = other.get("shoal") if isinstance(other, Mapping) else None
    own = own if isinstance(own, Mapping) else {}
    described = {(TRACE_PID, p.get("tid")): p for p in own.get("pes", ()) if isinstance(p, Mapping)}
    summary = own.get("summary") if isinstance(own.get("summary"), Mapping) else None
    for key in described:
        if key not in rows.index:
            rows.index[key] = len(rows.index)
    if summary is not None:
        for p in summary.get("pes", ()):
            if isinstance(p, Mapping) and (TRACE_PID, p.get("tid")) not in rows.index:
                rows.index[(TRACE_PID, p.get("tid"))] = len(rows.index)
            for name in (p.get("busy") or {}) if isinstance(p, Mapping) else ():
                if name not in name_ids:
                    name_ids[name] = len(names)
                    names.append(name)
    n = len(rows.index)
    # order rows by PE number (unnamed tracks last), then renumber everything
    keys = list(rows.index)
    labels = [rows.names.get(k) or (f"PE {described[k]['pe']}" if k in described else f"tid {k[1]}") for k in keys]
    pes: list[int | None] = []
    for k, label in zip(keys, labels):
        found = re.fullmatch(r"PE (\d+)", label)
        pes.append(int(described[k]["pe"]) if k in described else int(found.group(1)) if found else None)
    order = sorted(range(n), key=lambda i: (pes[i] is None, pes[i] or 0, labels[i]))
    renum = np.empty(max(n, 1), int)
    renum[order] = np.arange(n)
    labels = [labels[i] for i in order]
    pes = [pes[i] for i in order]
    row_of_key = {k: int(renum[rows.index[k]]) for k in keys}
    e = np.array(ent, float).reshape(-1, 4)
    er, em, es, ed = renum[e[:, 0].astype(int)] if n else np.zeros(0, int), e[:, 1].astype(int), e[:, 2], e[:, 3]
    iv = np.array(idle, float).reshape(-1, 3)
    ir = renum[iv[:, 0].astype(int)] if n else np.zeros(0, int)
    for d in (*migr, *bal, *marks):
        d["row"] = int(renum[d["row"]])
    # each row's span: its events, widened by what shoal wrote about it
    spans = np.full((n, 2), [np.inf, -np.inf])
    for rr, a, b in ((er, es, es + ed), (ir, iv[:, 1], iv[:, 2])):
        if len(rr):
            np.minimum.at(spans[:, 0], rr, a)
            np.maximum.at(spans[:, 1], rr, b)
    for d in (*migr, *bal, *marks):
        spans[d["row"], 0] = min(spans[d["row"], 0], d["ts"])
        spans[d["row"], 1] = max(spans[d["row"], 1], d["ts"] + d.get("dur", 0.0))
    for s in sends:
        r = int(renum[s[0]])
        spans[r] = [min(spans[r, 0], s[1]), max(spans[r, 1], s[1])]
    cpu = np.full(n, np.nan)
    for k, p in described.items():
        r = row_of_key[k]
        spans[r] = [min(spans[r, 0], _num(p.get("start"))), max(spans[r, 1], _num(p.get("end")))]
        if isinstance(p.get("cpu"), (int, float)):
            cpu[r] = float(p["cpu"])
    if summary is not None:
        for p in summary.get("pes", ()):
            srow = row_of_key.get((TRACE_PID, p.get("tid")))
            if srow is not None:
                o = _num(p.get("origin"))
                end = o + _num(p.get("width")) * max((len(v) for v in _series(p)), default=0)
                spans[srow] = [min(spans[srow, 0], o), max(spans[srow, 1], end)]
    empty = ~np.isfinite(spans[:, 0])
    spans[empty] = 0.0
    lo, hi = (float(spans[:, 0].min()), float(spans[:, 1].max())) if n else (0.0, 1.0)
    if summary is not None:
        widths = [_num(p.get("width")) for p in summary.get("pes", ()) if _num(p.get("width")) > 0]
        bins = max(1, min(bins * 2, int(np.ceil((hi - lo) / max(widths, default=1.0)))))
    edges = np.linspace(lo, hi if hi > lo else lo + 1.0, bins + 1)
    nm = len(names)
    work = np.zeros((n, nm, bins))
    calls = np.zeros((n, nm, bins))
    if len(er):
        order_e = np.lexsort((em, er))
        keys_e = er[order_e] * max(nm, 1) + em[order_e]
        cuts = np.flatnonzero(np.diff(keys_e)) + 1
        for grp in np.split(order_e, cuts):
            r, m = er[grp[0]], em[grp[0]]
            work[r, m] = coverage(es[grp], es[grp] + ed[grp], edges)
            calls[r, m] = np.histogram(es[grp], edges)[0]
    idle_b = np.zeros((n, bins))
    for r in np.unique(ir):
        sel = ir == r
        idle_b[r] = coverage(iv[sel, 1], iv[sel, 2], edges)
    pack = np.zeros((n, bins))
    for d in migr:
        pack[d["row"]] += coverage(np.array([d["ts"]]), np.array([d["ts"] + d["dur"]]), edges)
    covered = np.array([coverage(np.array([a]), np.array([b]), edges) for a, b in spans]).reshape(n, bins)
    pe_row = {pe: i for i, pe in enumerate(pes) if pe is not None}
    comm_count, comm_bytes = np.zeros((n, n)), np.zeros((n, n))
    sent = np.zeros((n, bins))
    sr = np.array([renum[s[0]] for s in sends], int)
    st = np.array([s[1] for s in sends], float)
    sb = np.array([s[3] for s in sends], float)
    sd = np.array([pe_row.get(s[2], -1) if isinstance(s[2], int) else -1 for s in sends], int)
    ok = sd >= 0
    np.add.at(comm_count, (sr[ok], sd[ok]), 1)
    np.add.at(comm_bytes, (sr[ok], sd[ok]), sb[ok])
    for r in np.unique(sr):
        sent[r] = np.histogram(st[sr == r], edges, weights=sb[sr == r])[0]
    if summary is not None:
        try:
            _add_bins(summary, row_of_key, name_ids, pe_row, edges, work, calls, idle_b, sent, comm_count,
                      comm_bytes)
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            raise ShoalError(f"the trace's summary-mode bins (otherData.shoal.summary) are malformed: {exc}") from None
    try:
        waits = waiting_series(data, row_of_key, summary, edges)
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        raise ShoalError(f"the trace's queue or futures (otherData.shoal.summary) are malformed: {exc}") from None
    an = Analysis(rows=labels, pes=pes, spans=spans - lo, edges=edges - lo, methods=names, work=work, idle=idle_b,
                  pack=pack, covered=covered, calls=calls, comm_count=comm_count, comm_bytes=comm_bytes,
                  sent_bytes=sent, slice_row=er, slice_method=em, slice_start=es - lo, slice_dur=ed,
                  slice_element=elements,
                  slice_cause=[None if c is None else (c[0], c[1] - lo) for c in caused], idle_row=ir, idle_start=iv[:, 1] - lo, idle_dur=iv[:, 2] - iv[:, 1],
                  migrations=migr, cpu=cpu, send_row=sr, send_time=st - lo, send_bytes=sb,
                  send_to=np.array([s[2] if isinstance(s[2], int) else -1 for s in sends], int), balances=bal,
                  marks=marks,
                  queue=waits["queue"], futures_made=waits["made"], futures_resolved=waits["resolved"],
                  future_wait=waits["wait"], summary_mode=summary is not None, notes=list(notes or ()))
    for d in (*migr, *bal, *marks):
        d["ts"] -= lo
    return an


def _series(p: Mapping[str, Any]) -> list[Any]:
    return [*(p.get("busy") or {}).values(), p.get("idle") or [], p.get("sent") or []]


def _add_bins(summary: Mapping[str, Any], row_of_key: Mapping[tuple[Any, Any], int], name_ids: Mapping[str, int],
              pe_row: Mapping[int, int], edges: np.ndarray, work: np.ndarray, calls: np.ndarray, idle: np.ndarray,
              sent: np.ndarray, comm_count: np.ndarray, comm_bytes: np.ndarray) -> None:
    """Summary mode: each PE's bins (µs per bin of its own width) spread onto the grid."""
    for p in summary.get("pes", ()):
        r = row_of_key.get((TRACE_PID, p.get("tid")))
        if r is None or not isinstance(p, Mapping):
            continue
        o, w = _num(p.get("origin")), _num(p.get("width"))
        for name, values in (p.get("busy") or {}).items():
            work[r, name_ids[name]] += _rebin(values, o, w, edges)
        for name, values in (p.get("calls") or {}).items():
            if name in name_ids:
                calls[r, name_ids[name]] += _rebin(values, o, w, edges)
        idle[r] += _rebin(p.get("idle") or [], o, w, edges)
        sent[r] += _rebin(p.get("sent") or [], o, w, edges)
        for dest, (count, nbytes) in (p.get("to") or {}).items():
            d = pe_row.get(int(dest))
            if d is not None:
                comm_count[r, d] += count
                comm_bytes[r, d] += nbytes


def usage(an: Analysis) -> dict[str, np.ndarray]:
    """Per row, µs: span, work, pack, idle, overhead (the usage profile)."""
    return {"span": an.covered.sum(axis=1), "work": an.busy.sum(axis=1), "pack": an.pack.sum(axis=1),
            "idle": an.idle.sum(axis=1), "overhead": an.overhead.sum(axis=1)}


def method_totals(an: Analysis) -> list[dict[str, Any]]:
    """Entry methods by total time: name, calls, total, mean and max µs (max: full traces only)."""
    out = []
    for m, name in enumerate(an.methods):
        total = float(an.work[:, m].sum())
        count = int(round(float(an.calls[:, m].sum())))
        sel = an.slice_method == m
        mx = float(an.slice_dur[sel].max()) if sel.any() else float("nan")
        out.append({"name": name, "calls": count, "total": total, "mean": total / count if count else 0.0,
                    "max": mx})
    return sorted(out, key=lambda d: -d["total"])


def outliers(an: Analysis, k: int = 3) -> list[dict[str, Any]]:
    """The ``k`` PEs least like the others: by the distance of their (work, pack, idle,
    overhead) fractions from the mean over PEs, as Projections' outlier analysis does;
    ``score``: how many standard deviations of the distances above their mean (0 for
    fewer than 3 PEs, where the distances cannot tell one PE from another)."""
    u = usage(an)
    span = np.maximum(u["span"], 1e-12)
    frac = np.stack([u["work"], u["pack"], u["idle"], u["overhead"]], axis=1) / span[:, None]
    if len(frac) < 2:
        return []
    mean = frac.mean(axis=0)
    dist = np.sqrt(((frac - mean) ** 2).sum(axis=1))
    spread = float(dist.std())
    ranked = np.argsort(-dist, kind="stable")[:k]
    score = (dist - dist.mean()) / spread if len(frac) >= 3 and spread > 1e-9 else np.zeros(len(frac))
    return [{"row": int(i), "name": an.rows[i], "distance": float(dist[i]), "score": float(score[i]),
             "work": float(frac[i, 0]), "pack": float(frac[i, 1]), "idle": float(frac[i, 2]),
             "overhead": float(frac[i, 3])} for i in ranked]
