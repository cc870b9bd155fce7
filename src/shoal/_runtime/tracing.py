"""Timeline traces: a per-PE recorder and the writer of one Chrome trace-event file.

When tracing is on (``SHOAL_TRACE=out.json``, ``shoal run --trace out.json``) each PE
holds a :class:`Tracer`; when it is off the runtime holds ``None`` and tests it with
``is not None``. The recorder appends a tuple to a list per event (names of entry methods
interned to small ints) and does no I/O. At the end of the job every PE's
:meth:`Tracer.export` travels to PE 0, which merges them with :func:`write_trace` into
one file in the Chrome trace-event format that https://ui.perfetto.dev and
``chrome://tracing`` open: one track per PE named ``PE 0``, ``PE 1``, … with a slice per
entry method, idle period (category ``idle``), migration and balancing step, and an
instant per message sent. ``shoal trace summary out.json`` prints where each PE's time
went (:mod:`shoal.trace_summary`).

An exported record is a plain dict of lists of tuples (picklable, no per-event dicts)::

    {"format": "shoal.trace/1", "pe": 3,
     "start": 12.5, "end": 14.75,             # this PE's clock when tracing began, at export
     "cpu": 2.1,                               # the process's CPU seconds in between (optional)
     "offset": 0.0,                            # seconds added to every time of this record
     "names": ["Tile.step", ...],              # entry-method names; entries index this list
     "entries": [(name_index, t0, t1, element_index), ...],   # the index may be absent
                                               # (written as the slice's args.element)
     "idle": [(t0, t1), ...],
     "sends": [(t, dest_pe, nbytes), ...],
     "migrations": [(t0, t1, what, src_pe, dst_pe, nbytes), ...],
     "balances": [(t0, t1, collection, moved, strategy), ...],
     "marks": [(name, t, args_or_None), ...]}

Times are seconds of the PE's own clock (``time.perf_counter``). Clocks of different
processes need not agree: ``offset`` (seconds, default 0) is added to every time of its
record so that all records share one time line; in the file, times are microseconds from
the job's earliest instant. Slices of one PE must nest or be disjoint (a balancing step
inside an entry method is fine; one that ends after the entry method began and before it
ended is drawn wrongly by Perfetto).
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Mapping, Sequence

TYPE_CHECKING = False  # typing is for type checkers: a PE's start-up skips its import
if TYPE_CHECKING:
    from typing import Any, Callable, Iterator

from ..errors import ShoalError

__all__ = ["Tracer", "new_tracer", "write_trace", "FORMAT", "ENTRY", "IDLE", "SEND", "MIGRATION", "BALANCE", "MARK", "TRACE_PID"]

#: the ``format`` of an exported record and of the file's ``otherData.shoal``
FORMAT = "shoal.trace/1"
#: trace-event categories (``cat``) of each kind of event
ENTRY, IDLE, SEND, MIGRATION, BALANCE, MARK = "entry", "idle", "send", "migration", "lb", "mark"
#: every PE is a thread of this one process in the file (Perfetto treats pid 0 as the
#: kernel's swapper, so neither pid nor tid is 0: PE ``p`` is tid ``p + 1``)
TRACE_PID = 1

_LISTS = ("names", "entries", "idle", "sends", "migrations", "balances", "marks")


class Tracer:
    """Records one PE's timeline; every method appends one tuple (no I/O, no dict per event).

    ``clock`` is the clock the runtime takes its times from (seconds); the tracer reads
    it only when it is created and when it exports, to bound this PE's span.
    """

    __slots__ = ("pe", "clock", "start", "cpu_start", "ticks", "_ids", "_runs", "_names", "_entries", "_ticked",
                 "_idle", "_sends", "_migrations", "_balances", "_marks")

    def __init__(self, pe: int, clock: Callable[[], float] = time.perf_counter) -> None:
        if not isinstance(pe, int) or isinstance(pe, bool) or pe < 0:
            raise ValueError(f"Tracer(pe={pe!r}): a PE number is an int >= 0")
        self.pe = pe
        self.clock = clock
        self.start: float = clock()
        #: this process's CPU time then: at export, CPU time against wall time tells
        #: whether other processes took the PE's core (an oversubscribed machine)
        self.cpu_start = time.process_time()
        #: the compiled path's clock (``native_core.TickClock``) for :meth:`ticked`'s times
        self.ticks: Any = None
        self._ids: dict[str, int] = {}
        self._runs: dict[tuple[type, Any], int] = {}  # (element class, function) -> name index
        self._names: list[str] = []
        self._entries: list[tuple[Any, ...]] = []
        self._ticked: list[tuple[Any, ...]] = []  # the compiled path's, in ticks until export
        self._idle: list[tuple[float, float]] = []
        self._sends: list[tuple[float, int, int]] = []
        self._migrations: list[tuple[float, float, str, int, int, int]] = []
        self._balances: list[tuple[float, float, str, int, str]] = []
        self._marks: list[tuple[str, float, dict[str, Any] | None]] = []

    def entry(self, name: str, t0: float, t1: float) -> None:
        """Entry method ``name`` (``"Tile.step"``) ran from ``t0`` to ``t1``."""
        i = self._ids.get(name)
        if i is None:
            i = self._ids[name] = len(self._names)
            self._names.append(name)
        self._entries.append((i, t0, t1))

    def run(self, el: Any, fn: Any, t0: float, t1: float) -> None:
        """Entry method ``fn`` of element ``el`` ran from ``t0`` to ``t1`` (its name is made
        once per class and function; the element's index is kept for the viewer)."""
        key = (type(el), fn)
        i = self._runs.get(key)
        if i is None:
            i = self._runs[key] = self._intern(f"{type(el).__qualname__}.{getattr(fn, '__name__', '?')}")
        self._entries.append((i, t0, t1, getattr(el, "index", None)))

    def use_ticks(self, ticks: Any) -> None:
        """Take the compiled path's entries (:meth:`ticked`) in units of ``ticks``
        (``native_core.TickClock``, whose first reading is taken when the core is made):
        at export the tick rate is measured over the whole job."""
        self.ticks = ticks

    def ticked(self, el: Any, fn: Any, t0: int, t1: int) -> None:
        """:meth:`run` for the compiled path, which calls it with times in ticks of
        :attr:`ticks` (``core.trace``), made seconds at export with the best-measured tick
        rate. The tuple holds ints only (and the element's index): a tuple holding the
        function would stay tracked by the cyclic GC, whose passes over millions of them
        cost more than the name's lookup here (654 against 167 ns an event at 10^6 events)."""
        i = self._runs.get((type(el), fn))
        if i is None:
            i = self._runs[type(el), fn] = self._intern(f"{type(el).__qualname__}.{getattr(fn, '__name__', '?')}")
        self._ticked.append((i, t0, t1, getattr(el, "index", None)))

    def _seconds(self) -> list[tuple[Any, ...]]:
        """The compiled path's entries with times in seconds of :attr:`clock`."""
        if not self._ticked:
            return []
        scale = self.ticks.seconds_per_tick()
        tick0, second0 = self.ticks.origin
        return [(i, second0 + (a - tick0) * scale, second0 + (b - tick0) * scale, index)
                for i, a, b, index in self._ticked]

    def _intern(self, name: str) -> int:
        i = self._ids.get(name)
        if i is None:
            i = self._ids[name] = len(self._names)
            self._names.append(name)
        return i

    def idle(self, t0: float, t1: float) -> None:
        """The PE waited for messages from ``t0`` to ``t1``."""
        self._idle.append((t0, t1))

    def send(self, t: float, dest_pe: int, nbytes: int) -> None:
        """A message of ``nbytes`` left for ``dest_pe`` at ``t``."""
        self._sends.append((t, dest_pe, nbytes))

    def migration(self, t0: float, t1: float, what: str, src_pe: int, dst_pe: int, nbytes: int) -> None:
        """Element ``what`` moved from ``src_pe`` to ``dst_pe`` (out of or into this PE)."""
        self._migrations.append((t0, t1, what, src_pe, dst_pe, nbytes))

    def balance(self, t0: float, t1: float, collection: str, moved: int, strategy: str) -> None:
        """A balancing step of ``collection`` by ``strategy`` moved ``moved`` elements."""
        self._balances.append((t0, t1, collection, moved, strategy))

    def mark(self, name: str, t: float, **args: Any) -> None:
        """Any other instant; ``args`` appear in the viewer (values that are not JSON as ``repr``)."""
        self._marks.append((name, t, args or None))

    def __len__(self) -> int:
        """Events recorded so far."""
        return (len(self._entries) + len(self._ticked) + len(self._idle) + len(self._sends) + len(self._migrations)
                + len(self._balances) + len(self._marks))

    def export(self, offset: float = 0.0) -> dict[str, Any]:
        """This PE's events as a picklable record (see the module's docstring); a snapshot:
        recording may go on. ``offset``: seconds to add to every time of the record."""
        entries = self._entries + self._seconds()
        return {
            "format": FORMAT, "pe": self.pe, "start": self.start, "end": self.clock(), "offset": offset,
            "cpu": time.process_time() - self.cpu_start,
            "names": list(self._names), "entries": entries, "idle": list(self._idle),
            "sends": list(self._sends), "migrations": list(self._migrations), "balances": list(self._balances),
            "marks": list(self._marks),
        }


def new_tracer(pe: int, bin_seconds: float = 0.0, restart: str = "") -> Tracer:
    """This PE's recorder: every event (``bin_seconds`` 0), or time bins of that many
    seconds whose size is bounded however long the job runs (``SHOAL_TRACE_SUMMARY``).
    A job restarted from checkpoint ``restart`` begins its timeline with a ``restart`` mark."""
    if bin_seconds > 0:
        from .trace_bins import SummaryTracer

        tracer: Tracer = SummaryTracer(pe, bin_seconds)
    else:
        tracer = Tracer(pe)
    if restart:
        tracer.mark("restart", tracer.start, checkpoint=restart)
    return tracer


# -- writing: validation, then one streamed JSON file -------------------------------------------
def write_trace(path: str | os.PathLike[str], records: Sequence[Mapping[str, Any]], *,
                meta: Mapping[str, Any] | None = None) -> None:
    """Merge every PE's :meth:`Tracer.export` into one Chrome trace-event file at ``path``.

    The file is ``{"traceEvents": [...], "displayTimeUnit": "ms", "otherData": {...}}``:
    ``otherData`` holds ``meta`` (JSON values; the key ``"shoal"`` is reserved) and, under
    ``"shoal"``, the format and each PE's track and span. Each record may carry an
    ``offset`` (seconds added to its times, to align the clocks of different processes);
    times are written in microseconds from the job's earliest instant. The file appears
    whole or not at all (a temporary file beside it, then ``os.replace``). A record that
    is not one, or a path that cannot be written, raises :class:`shoal.ShoalError`.
    """
    target = _check_path(path)
    checked = _check_records(records)
    other = _check_meta(meta)
    base = min(_earliest(rec) + rec["offset"] for rec in checked)  # the job's earliest instant
    other["shoal"] = {
        "format": FORMAT,
        "pes": [{"pe": rec["pe"], "tid": rec["pe"] + 1, "start": _us(_earliest(rec) + rec["offset"] - base),
                 "end": _us(_latest(rec) + rec["offset"] - base),
                 **({"cpu": _us(rec["cpu"])} if _finite(rec.get("cpu")) else {})} for rec in checked],
    }
    from .trace_bins import binned, counter_events, summary_description
    from .trace_flows import flow_events

    summary = [rec for rec in checked if "bins" in rec]
    if summary:  # summary mode (SHOAL_TRACE_SUMMARY): each PE's time bins
        other["shoal"]["summary"] = {"pes": [summary_description(rec, base) for rec in summary]}
    import json  # here, not at the top: a PE that does not trace never needs it

    tail = json.dumps(other, default=repr, allow_nan=False)
    folder = os.path.dirname(target) or "."
    tmp = os.path.join(folder, f".{os.path.basename(target)}.{os.getpid()}.{os.urandom(4).hex()}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    except OSError as exc:
        raise ShoalError(f"cannot write the trace to {target!r}: {exc.strerror or exc}; "
                         "give a path in a writable folder (SHOAL_TRACE, shoal run --trace)") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write('{"traceEvents":[\n')
            f.write(f'{{"name":"process_name","ph":"M","pid":{TRACE_PID},"tid":{checked[0]["pe"] + 1},'
                    '"args":{"name":"shoal job"}}')
            for rec in checked:
                for line in _events(rec, base):
                    f.write(",\n")
                    f.write(line)
                for line in counter_events(rec if "bins" in rec else binned(rec), base):
                    f.write(",\n")
                    f.write(line)
            for line in flow_events(checked, base):  # an arrow per migration
                f.write(",\n")
                f.write(line)
            f.write(f'\n],\n"displayTimeUnit":"ms",\n"otherData":{tail}}}\n')
        os.replace(tmp, target)
    except BaseException as exc:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(exc, OSError):
            raise ShoalError(f"cannot write the trace to {target!r}: {exc.strerror or exc}") from None
        raise


def _check_path(path: object) -> str:
    if not isinstance(path, (str, os.PathLike)):
        raise ShoalError(f"write_trace: path {path!r} is not a file name (a str or os.PathLike)")
    target = os.fspath(path)
    if not isinstance(target, str) or not target:
        raise ShoalError(f"write_trace: path {path!r} is not a file name")
    if os.path.isdir(target):
        raise ShoalError(f"cannot write the trace to {target!r}: it is a folder; name a file such as "
                         f"{os.path.join(target, 'trace.json')!r}")
    folder = os.path.dirname(target) or "."
    if not os.path.isdir(folder):
        raise ShoalError(f"cannot write the trace to {target!r}: folder {folder!r} does not exist")
    return target


def _check_meta(meta: Mapping[str, Any] | None) -> dict[str, Any]:
    if meta is None:
        return {}
    if not isinstance(meta, Mapping) or not all(isinstance(k, str) for k in meta):
        raise ShoalError(f"write_trace: meta must be a mapping with str keys, not {meta!r}")
    if "shoal" in meta:
        raise ShoalError("write_trace: meta key 'shoal' is reserved for the trace's own description")
    return dict(meta)


def _check_records(records: object) -> list[dict[str, Any]]:
    """Each record checked and completed (``offset`` 0 where absent); sorted by PE."""
    if not isinstance(records, Sequence) or isinstance(records, (str, bytes)):
        raise ShoalError(f"write_trace: records must be a list of Tracer.export() dicts, not {type(records).__name__}")
    if not records:
        raise ShoalError("write_trace: no records: give every PE's Tracer.export()")
    out: list[dict[str, Any]] = []
    seen: set[int] = set()
    for i, rec in enumerate(records):
        if not isinstance(rec, Mapping) or rec.get("format") != FORMAT:
            what = rec.get("format") if isinstance(rec, Mapping) else type(rec).__name__
            raise ShoalError(f"write_trace: records[{i}] is not a Tracer.export() record "
                             f"(format {what!r}, expected {FORMAT!r})")
        pe = rec.get("pe")
        if not isinstance(pe, int) or isinstance(pe, bool) or pe < 0:
            raise ShoalError(f"write_trace: records[{i}] has PE {pe!r}; a PE number is an int >= 0")
        if pe in seen:
            raise ShoalError(f"write_trace: two records of PE {pe}; give each PE's record once")
        seen.add(pe)
        missing = [k for k in _LISTS if not isinstance(rec.get(k), (list, tuple))]
        if missing:
            raise ShoalError(f"write_trace: the record of PE {pe} lacks the lists {', '.join(missing)}")
        full = dict(rec)
        offset = full.setdefault("offset", 0.0)
        if not _finite(offset):
            raise ShoalError(f"write_trace: the record of PE {pe} has offset={offset!r}; "
                             "it must be a finite number of seconds")
        full["offset"] = float(offset)
        bins = full.get("bins")
        if bins is not None and not (isinstance(bins, Mapping) and _finite(bins.get("width")) and bins["width"] > 0
                                     and _finite(bins.get("origin"))):
            raise ShoalError(f"write_trace: the record of PE {pe} has malformed bins (expected the "
                             "SummaryTracer.export() mapping with a width > 0 and an origin in seconds)")
        for kind, (size, at) in _SHAPES.items():
            for ev in full[kind]:
                if not _well_formed(ev, size, at, kind, len(full["names"])):
                    raise ShoalError(f"write_trace: PE {pe}: malformed {kind} event {ev!r}: {_WHY[kind]}")
        for key in ("start", "end"):  # where absent: the first and the last event
            value = full.get(key)
            if value is None:
                value = min(_times(full), default=0.0) if key == "start" else max(_times(full), default=0.0)
            if not _finite(value):
                raise ShoalError(f"write_trace: the record of PE {pe} has {key}={value!r}; "
                                 "it must be a finite number of seconds")
            full[key] = float(value)
        out.append(full)
    return sorted(out, key=lambda r: r["pe"])


#: per list of a record: its tuples' length and the places of their times
_SHAPES = {"entries": (3, (1, 2)), "idle": (2, (0, 1)), "sends": (3, (0,)), "migrations": (6, (0, 1)),
           "balances": (5, (0, 1)), "marks": (3, (1,))}
_WHY = {
    "entries": "expected (index into names, t0, t1[, element index]), finite seconds with t0 <= t1",
    "idle": "expected (t0, t1), finite seconds with t0 <= t1",
    "sends": "expected (t, dest_pe, nbytes), t finite seconds",
    "migrations": "expected (t0, t1, what, src_pe, dst_pe, nbytes), finite seconds with t0 <= t1",
    "balances": "expected (t0, t1, collection, moved, strategy), finite seconds with t0 <= t1",
    "marks": "expected (name, t, args dict or None), t finite seconds",
}


def _well_formed(ev: object, size: int, at: tuple[int, ...], kind: str, names: int) -> bool:
    if not isinstance(ev, (tuple, list)) or not (len(ev) == size or kind == "entries" and len(ev) == 4):
        return False
    times = [ev[i] for i in at]
    if not all(map(_finite, times)) or (len(times) == 2 and times[0] > times[1]):
        return False
    if kind == "entries":
        return isinstance(ev[0], int) and 0 <= ev[0] < names
    if kind == "marks":
        return ev[2] is None or isinstance(ev[2], Mapping)
    return True


def _finite(x: object) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _times(rec: Mapping[str, Any]) -> Iterator[float]:
    """Every start or instant time of ``rec``, and every end time (own clock)."""
    for ev in rec["entries"]:
        yield ev[1]
        yield ev[2]
    for ev in (*rec["idle"], *rec["migrations"], *rec["balances"]):
        yield ev[0]
        yield ev[1]
    for ev in rec["sends"]:
        yield ev[0]
    for ev in rec["marks"]:
        yield ev[1]


def _earliest(rec: Mapping[str, Any]) -> float:
    """The earliest instant of a checked record, its own clock."""
    return min(rec["start"], min(_times(rec), default=rec["start"]))


def _latest(rec: Mapping[str, Any]) -> float:
    """The latest instant of a checked record, its own clock."""
    return max(rec["end"], max(_times(rec), default=rec["end"]))


def _us(seconds: float) -> float:
    return round(seconds * 1e6, 3)


def _events(rec: Mapping[str, Any], base: float) -> Iterator[str]:
    """The JSON text of each event of ``rec``, times in µs from ``base`` (formatted by hand:
    a trace has millions of events, and ``json.dumps`` of a dict each is slow)."""
    import json

    pe = rec["pe"]
    shift = rec["offset"] - base
    where = f'"pid":{TRACE_PID},"tid":{pe + 1}'
    yield f'{{"name":"thread_name","ph":"M",{where},"args":{{"name":"PE {pe}"}}}}'
    yield f'{{"name":"thread_sort_index","ph":"M",{where},"args":{{"sort_index":{pe}}}}}'
    names = [json.dumps(n if isinstance(n, str) else str(n)) for n in rec["names"]]
    for ev in rec["entries"]:
        i, t0, t1 = ev[0], ev[1], ev[2]
        element = ev[3] if len(ev) > 3 else None
        extra = "" if element is None else f',"args":{{"element":{_element(element)}}}'
        yield (f'{{"name":{names[i]},"cat":"{ENTRY}","ph":"X","ts":{(t0 + shift) * 1e6:.3f},'
               f'"dur":{(t1 - t0) * 1e6:.3f},{where}{extra}}}')
    for t0, t1 in rec["idle"]:
        yield (f'{{"name":"idle","cat":"{IDLE}","ph":"X","ts":{(t0 + shift) * 1e6:.3f},'
               f'"dur":{(t1 - t0) * 1e6:.3f},{where}}}')
    for t, dest, nbytes in rec["sends"]:
        yield (f'{{"name":"send","cat":"{SEND}","ph":"i","s":"t","ts":{(t + shift) * 1e6:.3f},{where},'
               f'"args":{{"to":{_json(dest)},"bytes":{_json(nbytes)}}}}}')
    for t0, t1, what, src, dst, nbytes in rec["migrations"]:
        name = "migrate out" if src == pe and dst != pe else "migrate in"
        args = _json({"element": what, "from": src, "to": dst, "bytes": nbytes})
        yield (f'{{"name":"{name}","cat":"{MIGRATION}","ph":"X","ts":{(t0 + shift) * 1e6:.3f},'
               f'"dur":{(t1 - t0) * 1e6:.3f},{where},"args":{args}}}')
    for t0, t1, collection, moved, strategy in rec["balances"]:
        name = _json(f"balance {collection} ({strategy})")
        args = _json({"collection": collection, "strategy": strategy, "moved": moved})
        yield (f'{{"name":{name},"cat":"{BALANCE}","ph":"X","ts":{(t0 + shift) * 1e6:.3f},'
               f'"dur":{(t1 - t0) * 1e6:.3f},{where},"args":{args}}}')
    for name, t, args in rec["marks"]:
        extra = f',"args":{_json(dict(args))}' if args else ""
        yield (f'{{"name":{_json(str(name))},"cat":"{MARK}","ph":"i","s":"t","ts":{(t + shift) * 1e6:.3f},'
               f'{where}{extra}}}')


def _element(index: object) -> str:
    """An element's index as the JSON string the viewer shows: ``"[3, 1]"``, ``"2"``."""
    import json

    return json.dumps(str(list(index)) if isinstance(index, tuple) else str(index))


def _json(value: object) -> str:
    """``value`` as JSON; what JSON cannot hold (an object, ``nan``) as its ``repr``."""
    import json

    try:
        return json.dumps(value, allow_nan=False, default=repr)
    except ValueError:  # a nan or inf somewhere inside
        return json.dumps(repr(value))
