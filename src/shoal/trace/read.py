"""Reading a trace for the report: bounded, and forgiving of a file cut short.

``shoal trace report`` must never end in a traceback or in unbounded memory use, so
:func:`read_trace` refuses a file over a size bound before reading it (a gzip too, as it
is unpacked: a trace copied off a cluster is often compressed), names an empty
file, a file that is not JSON and one written by another shoal version, and recovers the
events of a file that ends early (a job killed while its trace was written or copied):
:func:`shoal._runtime.trace_file.write_trace` puts one event per line, so every complete
line before the cut is kept and the report says what was lost.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any

from ..errors import ShoalError
from .._runtime.tracing import FORMAT

__all__ = ["read_trace", "LoadedTrace", "MAX_BYTES", "dropped_note"]

#: the largest trace read by default (bytes): a JSON event takes about ten times its
#: text in memory, so 512 MiB of trace is about 5 GiB of memory
MAX_BYTES = 512 << 20


@dataclass
class LoadedTrace:
    """A trace's JSON object and what the reader noticed about it (shown in the report)."""

    data: dict[str, Any]
    #: one sentence each: a truncated file, a trace shoal did not write
    notes: list[str] = field(default_factory=list)
    truncated: bool = False
    nbytes: int = 0


def read_trace(path: str | os.PathLike[str], max_bytes: int = MAX_BYTES) -> LoadedTrace:
    """The trace at ``path``; :class:`shoal.ShoalError` naming the file and the problem
    for one that is missing, empty, over ``max_bytes``, not JSON or of another version."""
    name = os.fspath(path)
    try:
        size = os.stat(name).st_size
    except FileNotFoundError:
        raise ShoalError(f"trace file {name!r} not found") from None
    except OSError as exc:
        raise ShoalError(f"cannot read trace file {name!r}: {exc.strerror or exc}") from None
    if os.path.isdir(name):
        raise ShoalError(f"trace file {name!r} is a folder, not a trace")
    if size == 0:
        raise ShoalError(f"trace file {name!r} is empty (0 bytes): the job wrote no trace; "
                         "run it again with shoal run --trace PATH")
    if size > max_bytes:
        raise ShoalError(f"trace file {name!r} is {_mib(size)}, over the report's bound of "
                         f"{_mib(max_bytes)} (reading it would take about ten times that in memory); "
                         "record long runs with shoal run --trace-summary 10ms, or raise the bound with --max-mb")
    try:
        with open(name, "rb") as f:
            raw = f.read(max_bytes + 1)
        if raw[:2] == b"\x1f\x8b":  # gzip (a trace copied off a cluster): bounded as it is unpacked
            raw = _gunzip(raw, name, max_bytes)
        text = raw.decode("utf-8")
    except OSError as exc:
        raise ShoalError(f"cannot read trace file {name!r}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise ShoalError(f"{name!r} is not a trace: it is not text (a trace is a JSON file)") from None
    del raw
    loaded = LoadedTrace(data={}, nbytes=size)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        data = _recover(text, name, exc, loaded)
    if isinstance(data, list):
        data = {"traceEvents": data}
    if not isinstance(data, dict) or not isinstance(data.get("traceEvents"), list):
        raise ShoalError(f"{name!r} is not a trace: expected a Chrome trace-event file, "
                         "a JSON object with a \"traceEvents\" list (what shoal run --trace writes)")
    data["traceEvents"] = [ev for ev in data["traceEvents"] if isinstance(ev, dict)]
    _check_version(data, name, loaded)
    note = dropped_note(data.get("otherData"))
    if note:
        loaded.notes.append(note)
    loaded.data = data
    return loaded


def _gunzip(raw: bytes, name: str, max_bytes: int) -> bytes:
    """``raw`` gunzipped, refused past ``max_bytes`` unpacked (a small file may unpack huge)."""
    import zlib

    unpack = zlib.decompressobj(wbits=31)
    try:
        out = unpack.decompress(raw, max_bytes + 1)
    except zlib.error as exc:
        raise ShoalError(f"{name!r} is a damaged gzip file: {exc}") from None
    if len(out) > max_bytes:
        raise ShoalError(f"trace file {name!r} unpacks to more than the report's bound of {_mib(max_bytes)} "
                         "(reading it would take about ten times that in memory); record long runs with "
                         "shoal run --trace-summary 10ms, or raise the bound with --max-mb")
    return out


def _recover(text: str, name: str, exc: json.JSONDecodeError, loaded: LoadedTrace) -> dict[str, Any]:
    """The events before the cut of a shoal trace that ends early; else the JSON error."""
    lines = text.split("\n")
    events: list[Any] = []
    if text.startswith('{"traceEvents":['):
        for i, line in enumerate(lines[1:], start=2):
            line = line.rstrip().rstrip(",")
            if line.startswith("]"):
                break  # the events are whole: the error is in the tail
            try:
                events.append(json.loads(line))
            except json.JSONDecodeError:
                if any(rest.strip() for rest in lines[i:]):
                    break  # a bad line with more after it: not a cut, a damaged file
                loaded.truncated = True
                loaded.notes.append(
                    f"The trace file ends early ({len(text):,} bytes; the job or the copy was cut short while it "
                    f"was written): this report shows the {len(events):,} events recorded before the cut. The "
                    "tracks' spans and the job's description were at the end and are lost, and the PEs whose "
                    "events came later in the file are missing.")
                return {"traceEvents": events}
    raise ShoalError(f"{name!r} is not a trace: invalid JSON at line {exc.lineno} column {exc.colno} "
                     f"({exc.msg})") from None


def dropped_note(other: object) -> str | None:
    """The sentence on the malformed events the writer left out (``otherData.shoal.dropped``,
    see :mod:`shoal._runtime.trace_check`), or None where none was."""
    own = other.get("shoal") if isinstance(other, dict) else None
    dropped = own.get("dropped") if isinstance(own, dict) else None
    if not isinstance(dropped, dict) or not isinstance(dropped.get("events"), int) or dropped["events"] <= 0:
        return None
    n = dropped["events"]
    kinds, pes, examples = (_mapping(dropped.get(k)) for k in ("kinds", "pes", "examples"))
    what = ", ".join(f"{k} {v}" for k, v in kinds.items())
    where = ", ".join(f"PE {p}" for p in list(pes)[:8]) + (f" and {len(pes) - 8} more PEs" if len(pes) > 8 else "")
    first = next(iter(examples.values()), None)
    return (f"{n:,} malformed event{'s' * (n != 1)} {'were' if n != 1 else 'was'} left out when the trace was "
            f"written ({what}{'; on ' + where if where else ''}){': e.g. ' + str(first) if first else ''}. "
            "The rest of the timeline is whole; a malformed event is a fault of shoal's recorder, please report it.")


def _mapping(value: object) -> dict[Any, Any]:
    return value if isinstance(value, dict) else {}


def _mib(n: float) -> str:
    return f"{n / 2**20:,.0f} MiB" if n >= 2**20 else f"{n / 2**10:,.1f} KiB"


def _check_version(data: dict[str, Any], name: str, loaded: LoadedTrace) -> None:
    other = data.get("otherData")
    own = other.get("shoal") if isinstance(other, dict) else None
    if isinstance(own, dict):
        fmt = own.get("format")
        if fmt != FORMAT:
            raise ShoalError(f"{name!r} was written by another shoal version (trace format {fmt!r}); this "
                             f"shoal reads {FORMAT!r}: make the report with the shoal that wrote the trace")
    elif not loaded.truncated:
        loaded.notes.append("This trace was not written by shoal (no otherData.shoal): the report uses "
                            "its complete slices, one row per thread.")
