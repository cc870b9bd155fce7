"""The scheduler's queue on the timeline: a ``PE n queued`` counter track per PE.

What waits in a PE's scheduler is its local messages (sent to elements of the same PE)
and its coroutines ready to resume (``Runtime.local`` and ``Runtime.ready``); messages
from other PEs run as they are received, so they never wait there. With tracing on (and
not in summary mode) :func:`watch_queue` gives the runtime a class whose ``step`` notes
that length whenever it differs from the last note, at the start of each step, before the
step runs what waits: the backlog the step found. :func:`queue_events` writes the notes
as at most :data:`~.trace_bins.MAX_COUNTERS` counter events (``"ph": "C"``), each the
largest length in its stretch of the PE's span. With tracing off nothing is installed.
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
_QUEUED: dict[type, type] = {}


def _queued(cls: type) -> type:
    """``cls`` (a Runtime class) whose ``step`` first notes the queue's length when it changed."""
    if cls in _QUEUED:
        return _QUEUED[cls]
    plain_step = cls.step  # type: ignore[attr-defined]

    def step(self: Any) -> bool:
        waiting = len(self.local) + len(self.ready)
        tracer = self.tracer
        if waiting != tracer._queued_last:
            tracer._queued_last = waiting
            tracer._queue.append((tracer.clock(), waiting))
        return plain_step(self)

    step.__doc__ = plain_step.__doc__
    queued = _QUEUED[cls] = type(cls.__name__, (cls,), {"__slots__": (), "step": step, "__module__": cls.__module__})
    return queued


def watch_queue(rt: Runtime, tracer: Tracer) -> None:
    """Note the length of ``rt``'s scheduler queue in ``tracer`` (see the module's docstring)."""
    rt.__class__ = _queued(type(rt))


def queue_events(rec: Mapping[str, Any], base: float) -> Iterator[str]:
    """The JSON text of ``rec``'s ``PE n queued`` counter: per stretch of its span (at most
    :data:`MAX_COUNTERS`), the longest queue in it; a stretch like the one before is left out."""
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
