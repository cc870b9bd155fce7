"""Where the time went: a summary of a timeline trace (``shoal trace summary out.json``).

:func:`load_trace` reads a Chrome trace-event file (the one ``SHOAL_TRACE`` writes, or
any other in that format); :func:`summarize` adds up, per track (a PE), the time in entry
methods (slices of category ``entry``), idle (category ``idle``) and the rest of its span
(scheduling, sending, migrating, balancing: overhead), and ranks the entry methods by
their total time; :func:`print_summary` prints both as tables. Only complete slices
(``"ph": "X"``) count; nested slices of one category are counted once.
"""

from __future__ import annotations

import json
import os
import re
import sys
from dataclasses import dataclass, field
from typing import IO, Any, Iterable, Mapping

from ..errors import ShoalError
from .read import dropped_note
from .._runtime.tracing import BALANCE, ENTRY, FORMAT, IDLE, MIGRATION, SEND, TRACE_PID

__all__ = ["load_trace", "summarize", "print_summary", "Summary", "PESummary", "MethodSummary"]


@dataclass(frozen=True)
class PESummary:
    """One track (a PE) of a trace; times in seconds."""

    #: the PE's number (``None`` for a track of a trace shoal did not write, not named ``PE n``)
    pe: int | None
    #: the track's name, ``"PE 3"``
    name: str
    #: from the track's first to its last instant (shoal's traces: from tracing's start on this PE to its end)
    span: float
    #: in entry methods
    busy: float
    #: waiting for messages
    idle: float
    #: neither: the runtime's own work (scheduling, sending, migrating, balancing)
    other: float
    entries: int = 0
    sends: int = 0
    migrations: int = 0
    balances: int = 0

    @property
    def utilization(self) -> float:
        """Busy time / span (0 for an empty span)."""
        return self.busy / self.span if self.span > 0 else 0.0


@dataclass(frozen=True)
class MethodSummary:
    """One entry method over every PE; times in seconds."""

    name: str
    count: int
    total: float
    max: float

    @property
    def mean(self) -> float:
        return self.total / self.count if self.count else 0.0


@dataclass(frozen=True)
class Summary:
    """A trace summed up: the PEs by number (unnamed tracks last), the entry methods by total time."""

    pes: tuple[PESummary, ...]
    methods: tuple[MethodSummary, ...]
    #: from the trace's first to its last instant, seconds
    span: float
    #: the trace's ``otherData`` (what the job recorded about itself)
    meta: Mapping[str, Any] = field(default_factory=dict)

    @property
    def busy(self) -> float:
        return sum(p.busy for p in self.pes)

    @property
    def idle(self) -> float:
        return sum(p.idle for p in self.pes)

    @property
    def other(self) -> float:
        return sum(p.other for p in self.pes)


def load_trace(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read a Chrome trace-event file: ``{"traceEvents": [...], ...}`` (or a bare list of
    events, which is returned wrapped so). A file that is missing, not JSON or not a trace
    raises :class:`shoal.ShoalError` naming the file and what is wrong."""
    name = os.fspath(path)
    try:
        with open(name, encoding="utf-8") as f:
            data = json.load(f)
    except FileNotFoundError:
        raise ShoalError(f"trace file {name!r} not found") from None
    except IsADirectoryError:
        raise ShoalError(f"trace file {name!r} is a folder, not a trace") from None
    except OSError as exc:
        raise ShoalError(f"cannot read trace file {name!r}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise ShoalError(f"{name!r} is not a trace: it is not text (a trace is a JSON file)") from None
    except json.JSONDecodeError as exc:
        cut = "; the file ends early (cut short while it was copied?)" if exc.pos >= len(exc.doc.rstrip()) else ""
        raise ShoalError(f"{name!r} is not a trace: invalid JSON at line {exc.lineno} column {exc.colno} "
                         f"({exc.msg}){cut}") from None
    if isinstance(data, list):
        data = {"traceEvents": data}
    if not isinstance(data, dict) or not isinstance(data.get("traceEvents"), list):
        raise ShoalError(f"{name!r} is not a trace: expected a Chrome trace-event file, "
                         "a JSON object with a \"traceEvents\" list (what SHOAL_TRACE writes)")
    for i, ev in enumerate(data["traceEvents"]):
        if not isinstance(ev, dict):
            raise ShoalError(f"{name!r} is not a trace: traceEvents[{i}] is {ev!r}, not an event object")
    return data


def summarize(trace: Mapping[str, Any] | str | os.PathLike[str]) -> Summary:
    """Per track: span, busy (entry methods), idle and other time; entry methods by total time.

    ``trace``: what :func:`load_trace` returns, or a path to load. A slice with a time that
    is not a number raises :class:`shoal.ShoalError`."""
    if not isinstance(trace, Mapping):
        trace = load_trace(trace)
    events = trace.get("traceEvents")
    if not isinstance(events, list):
        raise ShoalError("not a trace: expected a mapping with a \"traceEvents\" list (see load_trace)")
    other = trace.get("otherData")
    meta = dict(other) if isinstance(other, Mapping) else {}
    names: dict[tuple[Any, Any], str] = {}
    tracks: dict[tuple[Any, Any], _Track] = {}
    methods: dict[str, list[float]] = {}  # name -> [count, total, max]
    for i, ev in enumerate(events):
        if not isinstance(ev, Mapping):
            raise ShoalError(f"traceEvents[{i}] is {ev!r}, not an event object")
        ph = ev.get("ph")
        key = (ev.get("pid"), ev.get("tid"))
        if ph == "M":
            if ev.get("name") == "thread_name" and isinstance(ev.get("args"), Mapping):
                names[key] = str(ev["args"].get("name", ""))
            continue
        if ph not in ("X", "i", "I"):
            continue
        ts = _number(ev.get("ts"), i, "ts")
        dur = _number(ev.get("dur", 0), i, "dur") if ph == "X" else 0.0
        track = tracks.get(key)
        if track is None:
            track = tracks[key] = _Track()
        track.first = min(track.first, ts)
        track.last = max(track.last, ts + dur)
        cat = ev.get("cat")
        if ph != "X":
            track.sends += cat == SEND
            continue
        if cat == ENTRY:
            track.busy.append((ts, ts + dur))
            m = methods.get(str(ev.get("name")))
            if m is None:
                m = methods[str(ev.get("name"))] = [0, 0.0, 0.0]
            m[0] += 1
            m[1] += dur
            m[2] = max(m[2], dur)
        elif cat == IDLE:
            track.idle.append((ts, ts + dur))
        elif cat == MIGRATION:
            track.migrations += 1
        elif cat == BALANCE:
            track.balances += 1
    spans = _shoal_spans(meta)
    for key in spans:  # a PE of a summary-mode trace may have no event of its own
        tracks.setdefault(key, _Track())
    _add_bins(meta, tracks, methods)
    pes = []
    for key, track in tracks.items():
        name = names.get(key) or _default_name(key)
        pe = spans.get(key, (None, 0.0, 0.0))[0]
        if pe is None:
            found = re.fullmatch(r"PE (\d+)", name)
            pe = int(found.group(1)) if found else None
        first, last = track.first, track.last
        if key in spans:
            first, last = min(first, spans[key][1]), max(last, spans[key][2])
        if first > last:  # no event, no span: an empty track
            first = last = 0.0
        span = (last - first) / 1e6
        busy = min(span, (_union(track.busy) + track.binned[0]) / 1e6)
        idle = min(span - busy, (_union(track.idle) + track.binned[1]) / 1e6)
        pes.append(PESummary(pe=pe, name=name, span=span, busy=busy, idle=idle, other=max(0.0, span - busy - idle),
                             entries=len(track.busy) + int(track.binned[2]), sends=track.sends,
                             migrations=track.migrations,
                             balances=track.balances))
    pes.sort(key=lambda p: (p.pe is None, p.pe if p.pe is not None else 0, p.name))
    ranked = sorted((MethodSummary(name=n, count=int(c), total=t / 1e6, max=mx / 1e6)
                     for n, (c, t, mx) in methods.items()), key=lambda m: (-m.total, m.name))
    firsts = [t.first for t in tracks.values() if t.first <= t.last] + [s[1] for s in spans.values()]
    lasts = [t.last for t in tracks.values() if t.first <= t.last] + [s[2] for s in spans.values()]
    span = (max(lasts) - min(firsts)) / 1e6 if firsts else 0.0
    return Summary(pes=tuple(pes), methods=tuple(ranked), span=span, meta=meta)


def _add_bins(meta: Mapping[str, Any], tracks: dict[tuple[Any, Any], "_Track"],
              methods: dict[str, list[float]]) -> None:
    """A summary-mode trace (``otherData.shoal.summary``): each PE's bins added to its
    track (busy and idle µs, calls) and to the entry methods (no longest run: ``nan``)."""
    own = meta.get("shoal")
    summary = own.get("summary") if isinstance(own, Mapping) else None
    if not isinstance(summary, Mapping):
        return
    for p in summary.get("pes", ()):
        try:
            track = tracks.setdefault((TRACE_PID, p["tid"]), _Track())
            origin, width = float(p["origin"]), float(p["width"])
            n = max((len(v) for v in [*p["busy"].values(), p["idle"]]), default=0)
            track.first, track.last = min(track.first, origin), max(track.last, origin + n * width)
            for name, series in p["busy"].items():
                calls = sum(p["calls"].get(name, ()))
                m = methods.setdefault(str(name), [0, 0.0, float("nan")])
                m[0] += calls
                m[1] += sum(series)
                track.binned[0] += sum(series)
                track.binned[2] += calls
            track.binned[1] += sum(p["idle"])
            track.sends += int(sum(p.get("msgs", ())))
        except (KeyError, TypeError, ValueError, AttributeError):
            continue  # a hand-edited description: the events alone still say what they can


class _Track:
    __slots__ = ("first", "last", "busy", "idle", "sends", "migrations", "balances", "binned")

    def __init__(self) -> None:
        self.binned = [0.0, 0.0, 0.0]  # summary mode: busy µs, idle µs, calls
        self.first, self.last = float("inf"), float("-inf")
        self.busy: list[tuple[float, float]] = []
        self.idle: list[tuple[float, float]] = []
        self.sends = self.migrations = self.balances = 0


def _number(value: object, i: int, key: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
        raise ShoalError(f"traceEvents[{i}] has {key}={value!r}; a trace's times are numbers of microseconds")
    return float(value)


def _union(intervals: list[tuple[float, float]]) -> float:
    """The length of the union of ``intervals`` (a slice nested in another counts once)."""
    total, end = 0.0, float("-inf")
    for a, b in sorted(intervals):
        if b <= end:
            continue
        total += b - max(a, end)
        end = b
    return total


def _shoal_spans(meta: Mapping[str, Any]) -> dict[tuple[Any, Any], tuple[int | None, float, float]]:
    """(pid, tid) -> (PE, start µs, end µs) from the ``otherData.shoal`` that shoal writes."""
    own = meta.get("shoal")
    if not isinstance(own, Mapping) or own.get("format") != FORMAT or not isinstance(own.get("pes"), list):
        return {}
    out: dict[tuple[Any, Any], tuple[int | None, float, float]] = {}
    for p in own["pes"]:
        try:
            out[(TRACE_PID, p["tid"])] = (int(p["pe"]), float(p["start"]), float(p["end"]))
        except (KeyError, TypeError, ValueError):
            continue  # a hand-edited description: the events alone still say enough
    return out


def _default_name(key: tuple[Any, Any]) -> str:
    pid, tid = key
    return f"pid {pid} tid {tid}"


# -- printing ----------------------------------------------------------------------------------
def _duration(seconds: float) -> str:
    """``1.23 s``, ``45.6 ms``, ``789 µs``: three significant digits."""
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if abs(seconds) >= scale or unit == "µs":
            x = seconds / scale
            return f"{x:.3g} {unit}" if abs(x) < 1000 else f"{x:,.0f} {unit}"
    return f"{seconds:g} s"  # pragma: no cover - the loop always returns


def _percent(part: float, whole: float) -> str:
    return f"{100 * part / whole:.1f}%" if whole > 0 else "—"


def _tables(summary: Summary, top: int) -> list[tuple[str, list[str], list[list[str]]]]:
    """The tables to print: (title, header, rows); the first column left-aligned, the rest right."""
    pe_rows = [[p.name, _duration(p.span), _duration(p.busy), _percent(p.busy, p.span), _duration(p.idle),
                _percent(p.idle, p.span), _duration(p.other), _percent(p.other, p.span), str(p.entries),
                str(p.sends), str(p.migrations)] for p in summary.pes]
    if len(summary.pes) > 1:
        span = sum(p.span for p in summary.pes)
        pe_rows.append(["all", _duration(span), _duration(summary.busy), _percent(summary.busy, span),
                        _duration(summary.idle), _percent(summary.idle, span), _duration(summary.other),
                        _percent(summary.other, span), str(sum(p.entries for p in summary.pes)),
                        str(sum(p.sends for p in summary.pes)), str(sum(p.migrations for p in summary.pes))])
    busy = summary.busy
    shown = summary.methods[:top]
    method_rows = [[m.name, str(m.count), _duration(m.total), _percent(m.total, busy), _duration(m.mean),
                    _duration(m.max) if m.max == m.max else "—"] for m in shown]
    more = len(summary.methods) - len(shown)
    title = f"entry methods by total time (top {len(shown)} of {len(summary.methods)})" if more else \
        "entry methods by total time"
    return [
        (f"time per PE (trace span {_duration(summary.span)})",
         ["PE", "span", "busy", "%", "idle", "%", "other", "%", "entries", "sends", "migrations"], pe_rows),
        (title, ["entry method", "calls", "total", "% busy", "mean", "max"], method_rows),
    ]


def print_summary(summary: Summary, file: IO[str] | None = None, top: int = 10) -> None:
    """Print ``summary`` as two tables (per PE; the ``top`` entry methods) to ``file``
    (default ``sys.stdout``): with ``rich`` when it is installed, as plain text otherwise."""
    if not isinstance(top, int) or isinstance(top, bool) or top < 1:
        raise ValueError(f"print_summary(top={top!r}): show at least 1 entry method")
    out = sys.stdout if file is None else file
    tables = _tables(summary, top)
    try:
        from rich import box
        from rich.console import Console
        from rich.table import Table
    except ImportError:
        _print_plain(tables, out)
        note = dropped_note(summary.meta)
        if note:
            print(note, file=out)
        return
    tty = hasattr(out, "isatty") and out.isatty()
    console = Console(file=out, highlight=False, width=None if tty or "COLUMNS" in os.environ else 120)
    for title, header, rows in tables:
        table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, show_edge=False)
        for i, h in enumerate(header):
            table.add_column(h, justify="left" if i == 0 else "right")
        for j, row in enumerate(rows):
            last_total = header[0] == "PE" and row[0] == "all" and j == len(rows) - 1
            table.add_row(*row, style="bold" if last_total else None)
        if not rows:
            table.add_row(*(["(none)"] + [""] * (len(header) - 1)))
        console.print(table)
        console.print()
    console.print(f"[dim]{_LEGEND}[/dim]")
    note = dropped_note(summary.meta)
    if note:
        console.print(note, markup=False)


_LEGEND = "busy: in entry methods; idle: waiting for messages; other: the runtime's own work (sends, migrations…)"


def _print_plain(tables: Iterable[tuple[str, list[str], list[list[str]]]], out: IO[str]) -> None:
    for title, header, rows in tables:
        rows = rows or [["(none)"] + [""] * (len(header) - 1)]
        widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
        print(title, file=out)
        for r in [header, *rows]:
            cells = [r[0].ljust(widths[0])] + [c.rjust(w) for c, w in zip(r[1:], widths[1:])]
            print("  ".join(cells).rstrip(), file=out)
        print(file=out)
    print(_LEGEND, file=out)
