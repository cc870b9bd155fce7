"""Summary-mode tracing: fixed-size time bins per PE and entry method, bounded however long the job.

``shoal run --trace out.json --trace-summary 10ms`` (``SHOAL_TRACE_SUMMARY=0.01``) gives
each PE a :class:`SummaryTracer`: instead of a tuple per event it adds each entry
method's time (and its calls), the idle time and the bytes sent into bins of the given
width. When a PE's bins reach :data:`MAX_BINS` the width doubles and neighbouring bins
merge (as Projections' summary mode does), so a PE's record holds at most ``MAX_BINS``
bins per entry method however long it runs: about (entry methods + 3) x 4096 numbers.
Migrations, balancing rounds and marks stay events (a handful per round). The scheduler
queue (:mod:`.trace_queue`) and the futures (:mod:`.trace_futures`) are bins too: per bin
the longest queue, the futures made and resolved, and the longest wait of those resolved.

In the file, :func:`summary_description` puts each PE's bins under
``otherData.shoal.summary`` (µs per bin, from the job's earliest instant) and
:func:`counter_events` adds a counter track per PE (``PE n busy %``) that Perfetto draws.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Iterator, Mapping

from .tracing import TRACE_PID, Tracer

__all__ = ["SummaryTracer", "summary_description", "counter_events", "binned", "MAX_BINS", "MAX_COUNTERS"]

#: the most bins a PE keeps; past it the bins double in width
MAX_BINS = 4096


class SummaryTracer(Tracer):
    """A :class:`Tracer` that adds time into bins instead of keeping every event."""

    binned = True

    __slots__ = ("width", "origin", "cap", "_busy", "_calls", "_idle_bins", "_sent", "_msgs", "_to", "_nbins",
                 "_queue_max", "_queued_at", "_made", "_resolved", "_wait_max")

    def __init__(self, pe: int, width: float, clock: Callable[[], float] = time.perf_counter,
                 cap: int = MAX_BINS) -> None:
        if not width > 0:
            raise ValueError(f"SummaryTracer(width={width!r}): a bin is a number of seconds > 0")
        if cap < 2:
            raise ValueError(f"SummaryTracer(cap={cap!r}): keep at least 2 bins")
        super().__init__(pe, clock)
        self.width = float(width)
        self.origin = self.start
        self.cap = cap
        self._busy: list[list[float]] = []  # per entry-method name: seconds per bin
        self._calls: list[list[int]] = []
        self._idle_bins: list[float] = []
        self._sent: list[float] = []  # bytes per bin
        self._msgs: list[int] = []
        self._to: dict[int, list[int]] = {}  # destination PE -> [messages, bytes]
        self._queue_max: list[int] = []  # the longest scheduler queue in each bin
        self._queued_at = self.start  # when the queue's length last changed
        self._made: list[int] = []  # futures made, resolved (each counted in the bin of that instant)
        self._resolved: list[int] = []
        self._wait_max: list[float] = []  # the longest wait of a future resolved in the bin, seconds
        self._nbins = 0

    def _sums(self) -> list[list[Any]]:
        """The series whose bins add up when two merge."""
        return [*self._busy, *self._calls, self._idle_bins, self._sent, self._msgs, self._made, self._resolved]

    def _maxima(self) -> list[list[Any]]:
        """The series whose bins keep the larger value when two merge."""
        return [self._queue_max, self._wait_max]

    # -- bins ------------------------------------------------------------------
    def _bin(self, t: float) -> int:
        """The bin of time ``t`` (bins added, or doubled in width, as needed)."""
        i = int((t - self.origin) / self.width)
        if i < 0:
            i = 0  # before tracing began (a clock read a little early): the first bin
        if i >= self.cap:
            while i >= self.cap:
                self._coarsen()
                i = int((t - self.origin) / self.width)
        if i >= self._nbins:
            grow = i + 1 - self._nbins
            for series in (*self._sums(), *self._maxima()):
                series.extend([0] * grow)
            self._nbins = i + 1
        return i

    def _coarsen(self) -> None:
        """Double the bins' width: each new bin is the sum of two old ones (in place: a
        caller may hold a series while it adds to it)."""
        for s in self._sums():
            s[:] = [s[k] + (s[k + 1] if k + 1 < len(s) else 0) for k in range(0, len(s), 2)]
        for s in self._maxima():
            s[:] = [max(s[k:k + 2]) for k in range(0, len(s), 2)]
        self._nbins = (self._nbins + 1) // 2
        self.width *= 2

    def _spread(self, series: list[float], t0: float, t1: float) -> None:
        """Add the interval ``[t0, t1]`` to ``series``, split at the bins' edges."""
        j = self._bin(t1)
        i = self._bin(t0)  # after j: j may have doubled the width
        if i == j:
            series[i] += t1 - t0
            return
        w, o = self.width, self.origin
        series[i] += o + (i + 1) * w - max(t0, o)
        for k in range(i + 1, j):
            series[k] += w
        series[j] += t1 - (o + j * w)

    def _method(self, i: int) -> None:
        while len(self._busy) <= i:
            self._busy.append([0.0] * self._nbins)
            self._calls.append([0] * self._nbins)

    # -- recording (the Tracer's interface) ---------------------------------------
    def entry(self, name: str, t0: float, t1: float) -> None:
        i = self._intern(name)
        self._method(i)
        self._spread(self._busy[i], t0, t1)
        self._calls[i][self._bin(t0)] += 1

    def run(self, el: Any, fn: Any, t0: float, t1: float) -> None:
        key = (type(el), fn)
        i = self._runs.get(key)
        if i is None:
            i = self._runs[key] = self._intern(f"{type(el).__qualname__}.{getattr(fn, '__name__', '?')}")
            self._method(i)
        b = int((t0 - self.origin) / self.width)
        if 0 <= b < self._nbins and int((t1 - self.origin) / self.width) == b:  # the common case: one bin
            self._busy[i][b] += t1 - t0
            self._calls[i][b] += 1
            return
        self._spread(self._busy[i], t0, t1)
        self._calls[i][self._bin(t0)] += 1

    def use_core(self, core: Any, ticks: Any) -> None:
        """As :meth:`Tracer.use_core`, with the core adding up its runs per entry method in
        bins of this tracer's width (in ticks: the tick rate is measured now, over 10 ms):
        it hands over one run per entry method and bin, when a later bin begins."""
        self.ticks = ticks
        self.core = core
        scale = ticks.seconds_per_tick()
        tick0, second0 = ticks.origin
        self.idle_in_core = core.trace_into(self.ticked_runs, max(0, round(tick0 + (self.origin - second0) / scale)),
                                            max(1, round(self.width / scale)))

    def ticked_runs(self, runs: list) -> None:
        """The compiled core's runs (``(class, function, t0, t1, index, calls, busy, cause)``, times
        in ticks): each a bin's calls of one entry method and their busy ticks, or one call
        that spans bins (split here); runs of None are the compiled serve loop's waits. The
        tick rate is measured again at most once a second."""
        ticks = self.ticks
        ticks.seconds_per_tick()
        (tick0, second0), scale = ticks.origin, ticks.scale
        for cls, fn, t0, t1, _, calls, busy, _ in runs:
            s0 = second0 + (t0 - tick0) * scale
            if cls is None:  # waits
                if calls == 1:
                    self._spread(self._idle_bins, s0, second0 + (t1 - tick0) * scale)
                else:
                    self._idle_bins[self._bin(s0)] += busy * scale
                continue
            i = self._name_of(cls, fn)
            self._method(i)
            if calls == 1:
                self._spread(self._busy[i], s0, second0 + (t1 - tick0) * scale)
                self._calls[i][self._bin(s0)] += 1
            else:
                b = self._bin(s0)
                self._busy[i][b] += busy * scale
                self._calls[i][b] += calls

    def idle(self, t0: float, t1: float) -> None:
        b = int((t0 - self.origin) / self.width)
        if 0 <= b < self._nbins and int((t1 - self.origin) / self.width) == b:
            self._idle_bins[b] += t1 - t0
            return
        self._spread(self._idle_bins, t0, t1)

    def send(self, t: float, dest_pe: int, nbytes: int) -> None:
        b = int((t - self.origin) / self.width)
        if not 0 <= b < self._nbins:
            b = self._bin(t)
        self._sent[b] += nbytes
        self._msgs[b] += 1
        to = self._to.get(dest_pe)
        if to is None:
            to = self._to[dest_pe] = [0, 0]
        to[0] += 1
        to[1] += nbytes

    def queued(self, waiting: int) -> None:
        """The scheduler's queue holds ``waiting`` now (:mod:`.trace_queue`, on a change):
        the length it had held since its last change is the least of each bin since."""
        t = self.clock()
        o, w, q = self.origin, self.width, self._queue_max
        j = int((t - o) / w)
        if not 0 <= j < self._nbins:
            j = self._bin(t)
            q = self._queue_max
        held = self._queued_last
        if held:
            i = int((self._queued_at - o) / self.width)
            if i == j:  # the common case: the length held within this bin
                if held > q[j]:
                    q[j] = held
            else:
                self._hold(held, self._queued_at, j)
        if waiting > q[j]:
            q[j] = waiting
        self._queued_last, self._queued_at = waiting, t

    def _hold(self, level: int, since: float, j: int) -> None:
        """The queue held ``level`` from ``since`` to bin ``j``."""
        q = self._queue_max
        for k in range(max(0, int((since - self.origin) / self.width)), j + 1):
            if level > q[k]:
                q[k] = level

    def future_done(self, t0: float, t1: float) -> None:
        """A future made at ``t0`` has its value at ``t1`` (:mod:`.trace_futures`)."""
        o, w = self.origin, self.width
        i, j = int((t0 - o) / w), int((t1 - o) / w)
        if not (0 <= i and j < self._nbins):
            j = self._bin(t1)
            i = self._bin(t0)  # after j: j may have doubled the width
        self._made[i] += 1
        self._resolved[j] += 1
        if t1 - t0 > self._wait_max[j]:
            self._wait_max[j] = t1 - t0

    def __len__(self) -> int:
        return super().__len__() + self._nbins * (len(self._busy) + 1)

    def export(self, offset: float = 0.0) -> dict[str, Any]:
        rec = super().export(offset)
        if self._queued_last:  # the queue holds its length to the end
            self._hold(self._queued_last, self._queued_at, self._bin(rec["end"]))
        opened = [self._bin(t0) for t0 in sorted(self._open_futures.values(), reverse=True)]
        made = list(self._made)
        for k in opened:  # made, not resolved yet
            made[k] += 1
        rec["bins"] = {"width": self.width, "origin": self.origin, "busy": [list(s) for s in self._busy],
                       "calls": [list(s) for s in self._calls], "idle": list(self._idle_bins),
                       "sent": list(self._sent), "msgs": list(self._msgs),
                       "to": {int(k): list(v) for k, v in self._to.items()},
                       "queue": list(self._queue_max), "made": made, "resolved": list(self._resolved),
                       "wait": list(self._wait_max)}
        return rec


# -- in the file -----------------------------------------------------------------------------------
def _us(values: list[Any]) -> list[float]:
    return [round(v * 1e6, 1) for v in values]


def summary_description(rec: Mapping[str, Any], base: float) -> dict[str, Any]:
    """One PE's bins for ``otherData.shoal.summary``: times in µs from ``base`` (seconds);
    ``queue`` (the longest queue per bin) and ``futures`` (``made``, ``resolved`` and the
    longest ``wait`` in µs, per bin) only where the PE had a queue or futures."""
    b = rec["bins"]
    names = rec["names"]
    return {"pe": rec["pe"], "tid": rec["pe"] + 1, "origin": round((b["origin"] + rec["offset"] - base) * 1e6, 3),
            "width": b["width"] * 1e6,
            "busy": {str(names[i]): _us(s) for i, s in enumerate(b["busy"]) if i < len(names)},
            "calls": {str(names[i]): list(s) for i, s in enumerate(b["calls"]) if i < len(names)},
            "idle": _us(b["idle"]), "sent": list(b["sent"]), "msgs": list(b["msgs"]),
            "to": {str(k): v for k, v in b["to"].items()},
            **({"queue": list(b["queue"])} if any(b.get("queue") or ()) else {}),
            **({"futures": {"made": list(b["made"]), "resolved": list(b["resolved"]), "wait": _us(b["wait"])}}
               if any(b.get("made") or ()) or any(b.get("resolved") or ()) else {})}


#: the most counter events a PE writes (neighbouring bins merge past it): a counter
#: event takes some 80 bytes of file, more than the bins it draws
MAX_COUNTERS = 512


def binned(rec: Mapping[str, Any]) -> dict[str, Any]:
    """A full record (every event) with :data:`MAX_COUNTERS` bins added, for its counter
    tracks: the time in entry methods and the bytes sent per bin."""
    first = min([rec["start"], *(ev[1] for ev in rec["entries"])])
    last = max([rec["end"], *(ev[2] for ev in rec["entries"])])
    t = SummaryTracer(rec["pe"], max(last - first, 1e-9) / MAX_COUNTERS * 1.000001, lambda: first)
    t._method(0)
    busy = t._busy[0]
    for ev in rec["entries"]:
        t._spread(busy, ev[1], ev[2])
    t._bin(last)  # the bins reach the end of the PE's span, idle or not
    for when, dest, nbytes in rec["sends"]:
        if isinstance(nbytes, (int, float)):
            t.send(when, dest, int(nbytes))
    return {**rec, "bins": {"width": t.width, "origin": t.origin, "busy": [busy], "idle": t._idle_bins,
                            "sent": t._sent}}


def counter_events(rec: Mapping[str, Any], base: float) -> Iterator[str]:
    """Counters (``"ph": "C"``) for Perfetto's counter tracks, per bin (or per group of
    neighbouring bins past :data:`MAX_COUNTERS`): ``PE n busy %`` and, where the PE sent
    anything, ``PE n sent MB/s``."""
    b = rec["bins"]
    n = max((len(s) for s in (*b["busy"], b["idle"])), default=0)
    per = -(-n // MAX_COUNTERS) if n else 1  # bins per counter event
    width = b["width"] * per
    busy = [sum(s[k] for s in b["busy"] for k in range(g, min(g + per, len(s)))) for g in range(0, n, per)]
    sent = b.get("sent") or []
    rate = [sum(sent[g:g + per]) / width / 1e6 for g in range(0, n, per)] if any(sent) else []
    origin = (b["origin"] + rec["offset"] - base) * 1e6
    where = f'"ph":"C","pid":{TRACE_PID},"tid":{rec["pe"] + 1}'
    for k in range(len(busy)):
        ts = f"{origin + k * width * 1e6:.3f}"
        pct = min(100.0, 100.0 * busy[k] / width)
        yield f'{{"name":"PE {rec["pe"]} busy %",{where},"ts":{ts},"args":{{"busy":{pct:.1f}}}}}'
        if rate:
            yield f'{{"name":"PE {rec["pe"]} sent MB/s",{where},"ts":{ts},"args":{{"MB/s":{rate[k]:.3g}}}}}'

