"""Futures on the timeline: each registered future's life as an async slice.

With tracing on :func:`watch_futures` makes the runtime note when each future of its PE
is made and when its value arrives; the file shows each as an async slice (``"ph": "b"``
/ ``"e"``, category ``future``) from one to the other, which Perfetto draws on a track of
its own under the job. In summary mode each future is added into the tracer's bins
instead (``SummaryTracer.future_done``: per bin, the futures made and resolved and the
longest wait), drawn as a ``PE n futures`` counter. With tracing off nothing of this is
installed: the runtime's class and methods are the plain ones.

Made: every registered future takes its number from ``Runtime._next_fid``, whether
Python (``Runtime.register_future``) or the compiled core (``core_new_future``: the
futures of compiled ``ret=True`` calls) makes it; the traced runtime's class reads that
attribute through a descriptor that notes each number taken. Resolved: the Python path
calls ``Runtime.forget_future``; a future whose value the compiled core sets itself (a
broadcast's gathered values) runs its done-callbacks, and the futures made through
``Runtime._new_future`` carry one that notes it. Local futures (channel receives,
all-reduces: no number) are not recorded.
"""

from __future__ import annotations

import json

from .tracing import TRACE_PID

TYPE_CHECKING = False  # typing is for type checkers: a PE's start-up skips its import
if TYPE_CHECKING:
    from typing import Any, Iterator, Mapping

    from .runtime import Runtime
    from .tracing import Tracer

__all__ = ["watch_futures", "future_events", "FUTURE"]

#: the trace-event category of a future's slice
FUTURE = "future"


class _NextFid:
    """``Runtime._next_fid`` of a traced runtime: setting it means the number it held was
    taken by a new future (Runtime.register_future, core_new_future)."""

    def __get__(self, rt: Any, cls: Any = None) -> Any:
        return self if rt is None else rt.__dict__["_next_fid"]

    def __set__(self, rt: Any, value: int) -> None:
        taken = rt.__dict__.get("_next_fid")
        rt.__dict__["_next_fid"] = value
        if taken is not None:
            tracer = rt.tracer
            open_futures = tracer._open_futures
            open_futures[taken] = tracer.clock()
            # the one before, if neither registered nor resolved, was dropped unused (the
            # compiled path's attempt at a call to an element of this PE): forget it too
            if taken - 1 in open_futures and taken - 1 not in rt.futures:
                del open_futures[taken - 1]


def _resolved(rt: Any, fid: int, fut: Any) -> None:
    """Future ``fid`` (``fut``) of ``rt``'s PE has its value: its slice ends now."""
    tracer = rt.tracer
    t0 = tracer._open_futures.pop(fid, None)
    if t0 is not None:
        if tracer.binned:  # summary mode: into bins, bounded
            tracer.future_done(t0, tracer.clock())
        else:
            tracer._futures.append((t0, tracer.clock(), fid, _where(getattr(fut, "_origin", None))))


#: the traced class of each runtime class, made once
_TRACED: dict[type, type] = {}


def _traced(cls: type) -> type:
    """``cls`` (the Runtime) with futures noted as they are made and forgotten."""
    if cls in _TRACED:
        return _TRACED[cls]

    def forget_future(self: Any, fid: int) -> None:
        fut = self.futures.pop(fid, None)
        if fut is not None:
            _resolved(self, fid, fut)

    traced = _TRACED[cls] = type(f"Traced{cls.__name__}", (cls,), {
        "__slots__": (), "_next_fid": _NextFid(), "forget_future": forget_future, "__module__": cls.__module__})
    return traced


def watch_futures(rt: Runtime, tracer: Tracer) -> None:
    """Note the life of each future of ``rt``'s PE in ``tracer`` (see the module's docstring)."""
    rt.__class__ = _traced(type(rt))
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
