"""A job's trace: which recorder each PE holds (every event, or time bins of bounded
size), and the writing of every PE's record into one Chrome trace-event file (PE 0, at
the end of the job). The recorders are :mod:`.tracing` and :mod:`.trace_bins`; the flow
arrows and counter tracks come from :mod:`.trace_flows` and :mod:`.trace_bins`."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

TYPE_CHECKING = False  # typing is for type checkers: a PE's start-up skips its import
if TYPE_CHECKING:
    from typing import Any, Iterator

from ..errors import ShoalError
from .trace_check import Dropped, check_records, finite, times
from .trace_bins import SummaryTracer, binned, counter_events, summary_description
from .trace_flows import flow_events
from .trace_futures import future_events
from .trace_messages import causes, message_events, pair
from .trace_queue import queue_events
from .tracing import BALANCE, ENTRY, FORMAT, IDLE, MARK, MIGRATION, SEND, TRACE_PID, Tracer

__all__ = ["new_tracer", "write_trace"]


def new_tracer(pe: int, bin_seconds: float = 0.0, restart: str = "") -> Tracer:
    """This PE's recorder: every event (``bin_seconds`` 0), or time bins of that many
    seconds whose size is bounded however long the job runs (``SHOAL_TRACE_SUMMARY``).
    A job restarted from checkpoint ``restart`` begins its timeline with a ``restart`` mark."""
    if bin_seconds > 0:
        tracer: Tracer = SummaryTracer(pe, bin_seconds)
    else:
        tracer = Tracer(pe)
    if restart:
        tracer.mark("restart", tracer.start, checkpoint=restart)
    return tracer


# -- writing: validation, then one streamed JSON file -------------------------------------------
def write_trace(path: str | os.PathLike[str], records: Sequence[Mapping[str, Any]], *,
                meta: Mapping[str, Any] | None = None) -> Dropped:
    """Merge every PE's :meth:`Tracer.export` into one Chrome trace-event file at ``path``.

    The file is ``{"traceEvents": [...], "displayTimeUnit": "ms", "otherData": {...}}``:
    ``otherData`` holds ``meta`` (JSON values; the key ``"shoal"`` is reserved) and, under
    ``"shoal"``, the format and each PE's track and span. Each record may carry an
    ``offset`` (seconds added to its times, to align the clocks of different processes);
    times are written in microseconds from the job's earliest instant. The file appears
    whole or not at all (a temporary file beside it, then ``os.replace``). A record that
    is not one, or a path that cannot be written, raises :class:`shoal.ShoalError`; a
    malformed event is left out of the file and counted (``otherData.shoal.dropped``,
    and the :class:`.trace_check.Dropped` returned).
    """
    target = _check_path(path)
    dropped = Dropped()
    checked = check_records(records, dropped)
    other = _check_meta(meta)
    base = min(_earliest(rec) + rec["offset"] for rec in checked)  # the job's earliest instant
    other["shoal"] = {
        "format": FORMAT,
        "pes": [{"pe": rec["pe"], "tid": rec["pe"] + 1, "start": _us(_earliest(rec) + rec["offset"] - base),
                 "end": _us(_latest(rec) + rec["offset"] - base),
                 **({"cpu": _us(rec["cpu"])} if finite(rec.get("cpu")) else {})} for rec in checked],
    }
    if dropped.total:
        other["shoal"]["dropped"] = dropped.description()
    summary = [rec for rec in checked if "bins" in rec]
    if summary:  # summary mode (SHOAL_TRACE_SUMMARY): each PE's time bins
        other["shoal"]["summary"] = {"pes": [summary_description(rec, base) for rec in summary]}
    messages = pair(checked, base)  # numbered messages (a full timeline with the compiled frames)
    caused = causes(checked, messages)
    if messages.sends or messages.runs:
        other["shoal"]["messages"] = messages.description()
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
                for line in _events(rec, base, caused.get(rec["pe"], {})):
                    f.write(",\n")
                    f.write(line)
                for line in counter_events(rec if "bins" in rec else binned(rec), base):
                    f.write(",\n")
                    f.write(line)
                for line in (*future_events(rec, base), *queue_events(rec, base)):
                    f.write(",\n")
                    f.write(line)
            for line in flow_events(checked, base):  # an arrow per migration
                f.write(",\n")
                f.write(line)
            for line in message_events(messages):  # an arrow per message that ran an entry method
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
    return dropped


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


def _earliest(rec: Mapping[str, Any]) -> float:
    """The earliest instant of a checked record, its own clock."""
    return min(rec["start"], min(times(rec), default=rec["start"]))


def _latest(rec: Mapping[str, Any]) -> float:
    """The latest instant of a checked record, its own clock."""
    return max(rec["end"], max(times(rec), default=rec["end"]))


def _us(seconds: float) -> float:
    return round(seconds * 1e6, 3)


def _events(rec: Mapping[str, Any], base: float,
            caused: Mapping[tuple[float, float], tuple[int, float]]) -> Iterator[str]:
    """The JSON text of each event of ``rec``, times in µs from ``base`` (formatted by hand:
    a trace has millions of events, and ``json.dumps`` of a dict each is slow); a run in
    ``caused`` names the PE and time of the send that caused it (``args.from``, ``args.sent``)."""
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
        extra = "" if element is None else f'"element":{_element(element)}'
        cause = caused.get((t0, t1)) if caused else None
        if cause is not None:
            extra += f'{"," if extra else ""}"from":"PE {cause[0]}","sent":{cause[1] * 1e6:.3f}'
        if extra:
            extra = f',"args":{{{extra}}}'
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
    for t0, t1, collection, moved, strategy, *reason in rec["balances"]:
        name = _json(f"balance {collection} ({strategy})")
        args = _json({"collection": collection, "strategy": strategy, "moved": moved,
                      **({"reason": dict(reason[0])} if reason and reason[0] else {})})
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
