"""The scheduler's queue on the timeline: a ``PE n queued`` counter track per PE.

What waits in a PE's scheduler is its local messages (sent to elements of the same PE)
and its coroutines ready to resume (``Runtime.local`` and ``Runtime.ready``); messages
from other PEs run as they are received, so they never wait there. With tracing on
:func:`watch_queue` gives the runtime a class whose ``step`` notes that length whenever
it differs from the last note, at the start of each step, before the step runs what
waits (the backlog the step found), and again at its end (what it left, so that a
queue the step drained does not read as held until a later step). :func:`queue_events` writes the notes as at most
:data:`~.trace_bins.MAX_COUNTERS` counter events (``"ph": "C"``), each the largest length
in its stretch of the PE's span. In summary mode the notes go into the tracer's bins
(``SummaryTracer.queued``: the longest queue per bin, bounded however long the run) and
the counter is drawn from them. The report's queue view reads either
(:mod:`shoal.trace.waiting`). With tracing off nothing is installed.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing is for type checkers: a PE's start-up skips its import
if TYPE_CHECKING:
    from typing import Any, Iterator, Mapping

    from .runtime import Runtime
    from .tracing import Tracer

from .trace_bins import MAX_COUNTERS
from .tracing import TRACE_PID

__all__ = ["watch_queue", "queue_events"]

#: the class with a noting step of each runtime class, made once
_QUEUED: dict[tuple[type, bool], type] = {}


def _queued(cls: type, binned: bool) -> type:
    """``cls`` (a Runtime class) whose ``step`` first notes the queue's length when it
    changed: as a note (a full timeline) or into the tracer's bins (summary mode)."""
    if (cls, binned) in _QUEUED:
        return _QUEUED[cls, binned]
    plain_step = cls.step  # type: ignore[attr-defined]

    def note(self: Any) -> None:
        waiting = len(self.local) + len(self.ready)
        tracer = self.tracer
        if waiting != tracer._queued_last:
            tracer._queued_last = waiting
            tracer._queue.append((tracer.clock(), waiting))

    def binned_note(self: Any) -> None:
        waiting = len(self.local) + len(self.ready)
        tracer = self.tracer
        if waiting != tracer._queued_last:
            tracer.queued(waiting)

    noting = binned_note if binned else note

    def step(self: Any) -> bool:
        noting(self)  # the backlog the step finds ...
        worked = plain_step(self)
        noting(self)  # ... and what it leaves: a drained queue is not held until the next step
        return worked

    step.__doc__ = plain_step.__doc__
    queued = _QUEUED[cls, binned] = type(cls.__name__, (cls,), {"__slots__": (), "step": step,
                                                                "__module__": cls.__module__})
    return queued


def watch_queue(rt: Runtime, tracer: Tracer) -> None:
    """Note the length of ``rt``'s scheduler queue in ``tracer`` (see the module's docstring)."""
    rt.__class__ = _queued(type(rt), tracer.binned)


def queue_events(rec: Mapping[str, Any], base: float) -> Iterator[str]:
    """The JSON text of ``rec``'s ``PE n queued`` counter: per stretch of its span (at most
    :data:`MAX_COUNTERS`), the longest queue in it; a stretch like the one before is left out."""
    if "bins" in rec:  # summary mode: the longest queue per bin
        yield from _binned_events(rec, base)
        return
    notes = sorted(rec.get("queue", ()))
    if not notes:
        return
    first, last = min(rec["start"], notes[0][0]), max(rec["end"], notes[-1][0])
    width = max(last - first, 1e-9) / MAX_COUNTERS
    peaks: dict[int, list[int]] = {}  # stretch -> [the longest queue in it, the length at its end]
    level = 0
    for t, waiting in notes:  # the length holds from one note to the next
        k = min(int((t - first) / width), MAX_COUNTERS - 1)
        peak = peaks.setdefault(k, [level, level])
        peak[0], peak[1] = max(peak[0], waiting), waiting
        level = waiting
    shift = rec["offset"] - base
    where = f'"ph":"C","pid":{TRACE_PID},"tid":{rec["pe"] + 1}'
    shown = -1
    for k in sorted(peaks):
        top, end = peaks[k]
        for at, value in ((k, top), (k + 1, end)):  # the stretch's peak, then what it ended with
            if value != shown and (at == k or at not in peaks):
                shown = value
                ts = (first + at * width + shift) * 1e6
                yield f'{{"name":"PE {rec["pe"]} queued",{where},"ts":{ts:.3f},"args":{{"queued":{value}}}}}'


def _binned_events(rec: Mapping[str, Any], base: float) -> Iterator[str]:
    """Summary mode's ``PE n queued`` counter: the longest queue per group of bins (at
    most :data:`MAX_COUNTERS` groups), where it differs from the group before."""
    b = rec["bins"]
    queue = b.get("queue") or []
    if not any(queue):
        return
    per = -(-len(queue) // MAX_COUNTERS)
    origin = (b["origin"] + rec["offset"] - base) * 1e6
    where = f'"ph":"C","pid":{TRACE_PID},"tid":{rec["pe"] + 1}'
    shown = -1
    for g in range(0, len(queue), per):
        value = max(queue[g:g + per])
        if value != shown:
            shown = value
            ts = origin + g * b["width"] * 1e6
            yield f'{{"name":"PE {rec["pe"]} queued",{where},"ts":{ts:.3f},"args":{{"queued":{value}}}}}'
