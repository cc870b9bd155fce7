"""Futures on the timeline: each registered future's life as an async slice.

With tracing on :func:`watch_futures` makes the runtime's future table note when each
future of its PE is made and when its value arrives; the file shows each as an async slice (``"ph": "b"``
/ ``"e"``, category ``future``) from one to the other, which Perfetto draws on a track of
its own under the job. In summary mode each future is added into the tracer's bins
instead (``SummaryTracer.future_done``: per bin, the futures made and resolved and the
longest wait), drawn as a ``PE n futures`` counter. With tracing off nothing of this is
installed: the table's class and methods are the plain ones.

Made: every registered future takes its number from ``FutureTable.next_fid``, whether
Python (``FutureTable.register``) or the compiled core (``core_new_future``: the
futures of compiled ``ret=True`` calls) makes it; the traced table's class reads that
attribute through a property that notes each number taken. Resolved: the Python path
calls ``FutureTable.forget``; a future whose value the compiled core sets itself (a
broadcast's gathered values) runs its done-callbacks, and the futures made through
``Runtime._new_future`` carry one that notes it. Local futures (channel receives,
all-reduces: no number) are not recorded.
"""

from __future__ import annotations

import json

from .future_table import FutureTable
from .tracing import TRACE_PID

TYPE_CHECKING = False  # typing is for type checkers: a PE's start-up skips its import
if TYPE_CHECKING:
    from typing import Any, Iterator, Mapping

    from .runtime import Runtime
    from .tracing import Tracer

__all__ = ["watch_futures", "future_events", "FUTURE"]

#: the trace-event category of a future's slice
FUTURE = "future"


#: the plain table's slot that a traced table's ``next_fid`` property stands in front of
_NEXT_FID: Any = vars(FutureTable)["next_fid"]


def _resolved(rt: Any, fid: int, fut: Any) -> None:
    """Future ``fid`` (``fut``) of ``rt``'s PE has its value: its slice ends now."""
    tracer = rt.tracer
    t0 = tracer._open_futures.pop(fid, None)
    if t0 is not None:
        if tracer.binned:  # summary mode: into bins, bounded
            tracer.future_done(t0, tracer.clock())
        else:
            tracer._futures.append((t0, tracer.clock(), fid, _where(getattr(fut, "_origin", None))))


def _traced_table(rt: Runtime) -> type:
    """A FutureTable class whose tables note in ``rt``'s tracer each number a new future
    takes and each future forgotten (one class per traced PE: it holds the runtime)."""

    def taken(table: Any, value: int) -> None:
        """Setting ``next_fid`` means the number it held was taken by a new future
        (FutureTable.register, core_new_future)."""
        taken = _NEXT_FID.__get__(table)
        _NEXT_FID.__set__(table, value)
        tracer: Any = rt.tracer
        open_futures = tracer._open_futures
        open_futures[taken] = tracer.clock()
        # the one before, if neither registered nor resolved, was dropped unused (the
        # compiled path's attempt at a call to an element of this PE): forget it too
        if taken - 1 in open_futures and taken - 1 not in table.futures:
            del open_futures[taken - 1]

    def forget(table: Any, fid: int) -> None:
        fut = table.futures.pop(fid, None)
        if fut is not None:
            _resolved(rt, fid, fut)

    return type("TracedFutureTable", (FutureTable,), {
        "__slots__": (), "next_fid": property(_NEXT_FID.__get__, taken), "forget": forget,
        "__module__": FutureTable.__module__})


def watch_futures(rt: Runtime, tracer: Tracer) -> None:
    """Note the life of each future of ``rt``'s PE in ``tracer`` (see the module's docstring)."""
    rt.future_table.__class__ = _traced_table(rt)
    made = rt._new_future

    def noted(fut: Any) -> None:
        _resolved(rt, fut.fid, fut)

    def new_future(back: int) -> Any:
        fut = made(back + 1)  # one frame more: this one
        fut.add_done_callback(noted)
        return fut

    rt._new_future = new_future


def _where(origin: Any) -> str:
    """Where a future was made, as ``Future.origin`` says it (formatted at the end only)."""
    if isinstance(origin, str):
        return origin
    if isinstance(origin, tuple) and len(origin) == 2 and hasattr(origin[0], "co_filename"):
        code, line = origin
        return f"{code.co_filename}:{line} in {code.co_name}"
    return repr(origin)


def future_events(rec: Mapping[str, Any], base: float) -> Iterator[str]:
    """The JSON text of a begin and an end per future of ``rec`` (µs from ``base``); the
    id holds the PE, as each PE numbers its futures from 1."""
    pe = rec["pe"]
    if "bins" in rec:
        yield from _binned_events(rec, base)
        return
    shift = rec["offset"] - base
    where = f'"pid":{TRACE_PID},"tid":{pe + 1}'
    for t0, t1, fid, origin in rec.get("futures", ()):
        ident = pe * 2**32 + int(fid)
        yield (f'{{"name":"future","cat":"{FUTURE}","ph":"b","id":{ident},"ts":{(t0 + shift) * 1e6:.3f},{where},'
               f'"args":{{"origin":{json.dumps(str(origin))},"pe":{pe}}}}}')
        yield f'{{"name":"future","cat":"{FUTURE}","ph":"e","id":{ident},"ts":{(t1 + shift) * 1e6:.3f},{where}}}'


def _binned_events(rec: Mapping[str, Any], base: float) -> Iterator[str]:
    """Summary mode's ``PE n futures`` counter, per group of bins (at most
    :data:`~.trace_bins.MAX_COUNTERS`): the futures made and resolved in it and the longest
    wait (ms) of those resolved; a group like the one before is left out."""
    from .trace_bins import MAX_COUNTERS

    b = rec["bins"]
    made, resolved, wait = b.get("made") or [], b.get("resolved") or [], b.get("wait") or []
    if not (any(made) or any(resolved)):
        return
    n = max(len(made), len(resolved))
    per = -(-n // MAX_COUNTERS)
    origin = (b["origin"] + rec["offset"] - base) * 1e6
    where = f'"ph":"C","pid":{TRACE_PID},"tid":{rec["pe"] + 1}'
    shown = ""
    for g in range(0, n, per):
        args = (f'"made":{sum(made[g:g + per])},"resolved":{sum(resolved[g:g + per])},'
                f'"longest wait ms":{max(wait[g:g + per], default=0) * 1e3:.4g}')
        if args != shown:
            shown = args
            ts = origin + g * b["width"] * 1e6
            yield f'{{"name":"PE {rec["pe"]} futures",{where},"ts":{ts:.3f},"args":{{{args}}}}}'
