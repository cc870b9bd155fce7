"""Timeline traces: the per-PE recorder (the file is written by :mod:`.trace_file`).

When tracing is on (``SHOAL_TRACE=out.json``, ``shoal run --trace out.json``) each PE
holds a :class:`Tracer`; when it is off the runtime holds ``None`` and tests it with
``is not None``. The recorder appends a tuple to a list per event (names of entry methods
interned to small ints) and does no I/O. At the end of the job every PE's
:meth:`Tracer.export` travels to PE 0, which merges them with :func:`.trace_file.write_trace` into
one file in the Chrome trace-event format that https://ui.perfetto.dev and
``chrome://tracing`` open: one track per PE named ``PE 0``, ``PE 1``, … with a slice per
entry method, idle period (category ``idle``), migration and balancing step, and an
instant per message sent. ``shoal trace summary out.json`` prints where each PE's time
went (:mod:`shoal.trace.summary`).

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
     "balances": [(t0, t1, collection, moved, strategy[, reason]), ...],   # reason: a dict
     "marks": [(name, t, args_or_None), ...],
     "futures": [(t_made, t_value, number, origin), ...],   # optional (trace_futures)
     "queue": [(t, length), ...],              # optional (trace_queue)
     "sent": [(t, dest_pe, nbytes, number), ...],       # optional (trace_messages): each
     "delivered": [(t, src_pe, nbytes, number), ...],   # frame sent and delivered, and
     "caused": [(t0, t1, src_pe, number), ...]}         # each run a frame caused

Times are seconds of the PE's own clock (``time.perf_counter``). Clocks of different
processes need not agree: ``offset`` (seconds, default 0) is added to every time of its
record so that all records share one time line; in the file, times are microseconds from
the job's earliest instant. Slices of one PE must nest or be disjoint (a balancing step
inside an entry method is fine; one that ends after the entry method began and before it
ended is drawn wrongly by Perfetto).
"""

from __future__ import annotations

import time

TYPE_CHECKING = False  # typing is for type checkers: a PE's start-up skips its import
if TYPE_CHECKING:
    from typing import Any, Callable

__all__ = ["Tracer", "clock_offset", "FORMAT", "ENTRY", "IDLE", "SEND", "MIGRATION", "BALANCE", "MARK", "MESSAGE", "TRACE_PID"]

#: the ``format`` of an exported record and of the file's ``otherData.shoal``
FORMAT = "shoal.trace/1"
#: trace-event categories (``cat``) of each kind of event
ENTRY, IDLE, SEND, MIGRATION, BALANCE, MARK = "entry", "idle", "send", "migration", "lb", "mark"
#: a message's arrow: its flow events and the short ``send`` slice its start binds to
MESSAGE = "message"
#: every PE is a thread of this one process in the file (Perfetto treats pid 0 as the
#: kernel's swapper, so neither pid nor tid is 0: PE ``p`` is tid ``p + 1``)
TRACE_PID = 1

_LISTS = ("names", "entries", "idle", "sends", "migrations", "balances", "marks")


def clock_offset() -> float:
    """``time.time() - time.perf_counter()``: what puts this PE's times on the job's shared
    time line (a record's ``offset``). Of 5 tries, the one whose two reads of
    ``perf_counter`` around ``time.time()`` are closest: a process descheduled between
    the reads would shift its whole timeline against the other PEs'."""
    best, offset = float("inf"), 0.0
    for _ in range(5):
        a = time.perf_counter()
        now = time.time()
        b = time.perf_counter()
        if b - a < best:
            best, offset = b - a, now - (a + b) / 2
    return offset


class Tracer:
    """Records one PE's timeline; every method appends one tuple (no I/O, no dict per event).

    ``clock`` is the clock the runtime takes its times from (seconds); the tracer reads
    it only when it is created and when it exports, to bound this PE's span.
    """

    #: False: every event is kept; a :class:`~.trace_bins.SummaryTracer` (True) adds them into bins
    binned = False

    __slots__ = ("pe", "clock", "start", "cpu_start", "ticks", "core", "idle_in_core", "_ids", "_runs", "_names",
                 "_entries", "_ticked", "_idle_ticked",
                 "_idle", "_sends", "_migrations", "_balances", "_marks", "_futures", "_open_futures",
                 "_queue", "_queued_last", "messages", "_cause", "_caused", "_ticked_caused", "_frames_sent", "_frames_delivered")

    def __init__(self, pe: int, clock: Callable[[], float] = time.perf_counter) -> None:
        if not isinstance(pe, int) or isinstance(pe, bool) or pe < 0:
            raise ValueError(f"Tracer(pe={pe!r}): a PE number is an int >= 0")
        self.pe = pe
        self.clock = clock
        self.start: float = clock()
        #: this process's CPU time then: at export, CPU time against wall time tells
        #: whether other processes took the PE's core (an oversubscribed machine)
        self.cpu_start = time.process_time()
        #: the compiled path's clock (``core_contract.TickClock``) for :meth:`ticked_runs`' times
        self.ticks: Any = None
        #: the compiled core that keeps its entry methods' runs for this tracer (``_native/trace.c``)
        self.core: Any = None
        #: whether the core records the waits of its serve loop too (the engine may then use it)
        self.idle_in_core = False
        self._ids: dict[str, int] = {}
        self._runs: dict[tuple[type, Any], int] = {}  # (element class, function) -> name index
        self._names: list[str] = []
        self._entries: list[tuple[Any, ...]] = []
        self._ticked: list[tuple[Any, ...]] = []  # the compiled path's, in ticks until export
        self._idle_ticked: list[tuple[int, int]] = []  # the compiled serve loop's waits, in ticks
        self._idle: list[tuple[float, float]] = []
        self._sends: list[tuple[float, int, int]] = []
        self._migrations: list[tuple[float, float, str, int, int, int]] = []
        self._balances: list[tuple[Any, ...]] = []
        self._marks: list[tuple[str, float, dict[str, Any] | None]] = []
        #: futures whose value came (:mod:`.trace_futures`), and those still waiting: number -> made at
        self._futures: list[tuple[float, float, int, str]] = []
        self._open_futures: dict[int, float] = {}
        #: the scheduler queue's length where it changed (:mod:`.trace_queue`): (t, length)
        self._queue: list[tuple[float, int]] = []
        self._queued_last = 0
        #: the transport that numbers frames for message arrows (:meth:`use_messages`), or None
        self.messages: Any = None
        #: the number of the frame being delivered (``Frames.trace_cause``), or None
        self._cause: Callable[[], int] | None = None
        self._caused: list[tuple[float, float, int]] = []  # (t0, t1, cause) of Python-path runs
        self._ticked_caused: list[tuple[int, int, int]] = []  # the compiled path's, in ticks
        self._frames_sent: list[tuple[float, int, int, int]] = []
        self._frames_delivered: list[tuple[float, int, int, int]] = []

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
        if self._cause is not None:
            cause = self._cause()
            if cause:
                self._caused.append((t0, t1, cause))

    def use_core(self, core: Any, ticks: Any) -> None:
        """Record the entry methods that the compiled ``core`` runs: it keeps their runs
        (:meth:`ticked_runs`, in units of ``ticks``, a ``core_contract.TickClock`` whose
        first reading is taken when the core is made) until this tracer exports, when the
        tick rate is measured over the whole job."""
        self.ticks = ticks
        self.core = core
        self.idle_in_core = core.trace_into(self.ticked_runs, 0, 0)

    def use_messages(self, transport: Any) -> bool:
        """Number every message ``transport`` sends and delivers (a full timeline with the
        compiled core: their times are its ticks), for an arrow from each send to the runs
        it caused and the bytes in flight (:mod:`.trace_messages`). False where it cannot."""
        if self.binned or self.ticks is None or not transport.trace_messages(True):
            return False
        self.messages = transport
        self._cause = transport.compiled()[1].trace_cause
        return True

    def _name_of(self, cls: type, fn: Any) -> int:
        """The name index of entry method ``fn`` of class ``cls`` (made once per pair)."""
        i = self._runs.get((cls, fn))
        if i is None:
            i = self._runs[cls, fn] = self._intern(f"{cls.__qualname__}.{getattr(fn, '__name__', '?')}")
        return i

    def ticked_runs(self, runs: list) -> None:
        """The compiled core's runs of entry methods, each ``(class, function, t0, t1,
        index, calls, busy)`` with times in ticks of :attr:`ticks`, one call each here
        (made seconds at export with the best-measured tick rate); a run of None is a wait
        of the compiled serve loop. The tuples kept hold ints only (and the element's
        index): a tuple holding the function would stay tracked by the cyclic GC, whose
        passes over millions of them cost more."""
        name_of, keep = self._name_of, self._ticked.append
        for cls, fn, t0, t1, index, _, _, cause in runs:
            if cls is None:
                self._idle_ticked.append((t0, t1))
            else:
                keep((name_of(cls, fn), t0, t1, index))
                if cause:
                    self._ticked_caused.append((t0, t1, cause))

    def _seconds(self) -> list[tuple[Any, ...]]:
        """The compiled path's entries with times in seconds of :attr:`clock`."""
        if not self._ticked:
            return []
        scale = self.ticks.seconds_per_tick()
        tick0, second0 = self.ticks.origin
        return [(i, second0 + (a - tick0) * scale, second0 + (b - tick0) * scale, index)
                for i, a, b, index in self._ticked]

    def _idle_seconds(self) -> list[tuple[float, float]]:
        """The compiled serve loop's waits with times in seconds of :attr:`clock`."""
        if not self._idle_ticked:
            return []
        scale = self.ticks.seconds_per_tick()
        tick0, second0 = self.ticks.origin
        return [(second0 + (a - tick0) * scale, second0 + (b - tick0) * scale) for a, b in self._idle_ticked]

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
        """A message of ``nbytes`` left for ``dest_pe`` at ``t`` (where the transport
        numbers messages, it records each send itself: :meth:`use_messages`)."""
        if self.messages is None:
            self._sends.append((t, dest_pe, nbytes))

    def _message_seconds(self) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
        """Every numbered frame sent and delivered so far, and every run a frame caused,
        in seconds of :attr:`clock` (the transport's records are the core's ticks)."""
        sent, delivered = self.messages.trace_events()
        scale = self.ticks.seconds_per_tick()
        tick0, second0 = self.ticks.origin
        self._frames_sent += [(second0 + (t - tick0) * scale, pe, n, k) for t, pe, n, k in sent]
        self._frames_delivered += [(second0 + (t - tick0) * scale, pe, n, k) for t, pe, n, k in delivered]
        caused = [(t0, t1, (c >> 32) - 1, c & 0xFFFFFFFF) for t0, t1, c in self._caused]
        caused += [(second0 + (a - tick0) * scale, second0 + (b - tick0) * scale, (c >> 32) - 1, c & 0xFFFFFFFF)
                   for a, b, c in self._ticked_caused]
        return [(t, pe, n) for t, pe, n, _ in self._frames_sent], caused

    def migration(self, t0: float, t1: float, what: str, src_pe: int, dst_pe: int, nbytes: int) -> None:
        """Element ``what`` moved from ``src_pe`` to ``dst_pe`` (out of or into this PE)."""
        self._migrations.append((t0, t1, what, src_pe, dst_pe, nbytes))

    def balance(self, t0: float, t1: float, collection: str, moved: int, strategy: str,
                reason: dict[str, Any] | None = None) -> None:
        """A balancing step of ``collection`` by ``strategy`` moved ``moved`` elements;
        ``reason``: what the strategy decided and why (``Reason.as_args()``), if it said."""
        self._balances.append((t0, t1, collection, moved, strategy) if reason is None
                              else (t0, t1, collection, moved, strategy, reason))

    def mark(self, name: str, t: float, **args: Any) -> None:
        """Any other instant; ``args`` appear in the viewer (values that are not JSON as ``repr``)."""
        self._marks.append((name, t, args or None))

    def __len__(self) -> int:
        """Events recorded so far."""
        return (len(self._entries) + len(self._ticked) + len(self._idle) + len(self._sends) + len(self._migrations)
                + len(self._balances) + len(self._marks) + len(self._futures))

    def export(self, offset: float = 0.0) -> dict[str, Any]:
        """This PE's events as a picklable record (see the module's docstring); a snapshot:
        recording may go on. ``offset``: seconds to add to every time of the record."""
        if self.core is not None:
            self.core.trace_flush()  # the runs the compiled core still keeps
        entries = self._entries + self._seconds()
        numbered: dict[str, Any] = {}
        sends = list(self._sends)
        if self.messages is not None:
            more, caused = self._message_seconds()
            sends += more
            numbered = {"sent": list(self._frames_sent), "delivered": list(self._frames_delivered), "caused": caused}
        return {
            "format": FORMAT, "pe": self.pe, "start": self.start, "end": self.clock(), "offset": offset,
            "cpu": time.process_time() - self.cpu_start,
            "names": list(self._names), "entries": entries, "idle": sorted(self._idle + self._idle_seconds()),
            "sends": sends, "migrations": list(self._migrations), "balances": list(self._balances),
            "marks": list(self._marks), "futures": list(self._futures),
            "queue": list(self._queue), **numbered,
        }
