"""The checks a trace's records pass before they are written (:mod:`.trace_file`).

A record that is not one (no PE, a list missing, an offset that is not a number) is
refused with :class:`shoal.ShoalError`: nothing of it can be placed on the timeline. A
malformed *event* in a good record (an idle period that ends before it begins, a time
that is ``nan``, an entry method whose name index is out of range) is left out, and
:class:`Dropped` counts it, per PE and kind, with the first one of each kind as an
example: one bad event never costs the whole timeline, and the file says how many were
left out (``otherData.shoal.dropped``; ``shoal trace summary`` and the report say it too).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

TYPE_CHECKING = False  # typing is for type checkers: a PE's start-up skips its import
if TYPE_CHECKING:
    from typing import Any, Iterator

from ..errors import ShoalError
from .tracing import FORMAT, _LISTS

__all__ = ["check_records", "Dropped", "finite", "times"]


class Dropped:
    """The malformed events left out of a trace: how many, per PE and kind."""

    __slots__ = ("counts", "examples")

    def __init__(self) -> None:
        #: (pe, kind) -> events left out
        self.counts: dict[tuple[int, str], int] = {}
        #: kind -> the first one left out and why it was (``"PE 0: (2.0, 1.0): expected ..."``)
        self.examples: dict[str, str] = {}

    def note(self, pe: int, kind: str, count: int, example: object) -> None:
        """``count`` malformed ``kind`` events of PE ``pe`` were left out; ``example`` is one."""
        self.counts[pe, kind] = self.counts.get((pe, kind), 0) + count
        if kind not in self.examples:
            self.examples[kind] = f"PE {pe}: {_short(example)}: {_WHY[kind]}"

    @property
    def total(self) -> int:
        """Every event left out."""
        return sum(self.counts.values())

    def description(self) -> dict[str, Any]:
        """For ``otherData.shoal.dropped``: the total, per kind, per PE, and an example per kind."""
        kinds: dict[str, int] = {}
        pes: dict[str, int] = {}
        for (pe, kind), n in sorted(self.counts.items()):
            kinds[kind] = kinds.get(kind, 0) + n
            pes[str(pe)] = pes.get(str(pe), 0) + n
        return {"events": self.total, "kinds": kinds, "pes": pes, "examples": dict(self.examples)}

    def sentence(self) -> str:
        """One line for a person: ``"3 malformed events left out (idle 2, entries 1) on PE 0, PE 2"``."""
        d = self.description()
        kinds = ", ".join(f"{k} {n}" for k, n in d["kinds"].items())
        pes = ", ".join(f"PE {p}" for p in d["pes"])
        return f"{d['events']} malformed event{'s' * (d['events'] != 1)} left out ({kinds}) on {pes}"


def _short(ev: object, limit: int = 120) -> str:
    text = repr(ev)
    return text if len(text) <= limit else text[:limit - 1] + "…"


def check_records(records: object, dropped: Dropped) -> list[dict[str, Any]]:
    """Each record checked and completed (``offset`` 0 where absent); sorted by PE. A
    malformed event is left out and counted in ``dropped``; a malformed record raises."""
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
        if not finite(offset):
            raise ShoalError(f"write_trace: the record of PE {pe} has offset={offset!r}; "
                             "it must be a finite number of seconds")
        full["offset"] = float(offset)
        bins = full.get("bins")
        if bins is not None and not (isinstance(bins, Mapping) and finite(bins.get("width")) and bins["width"] > 0
                                     and finite(bins.get("origin"))):
            raise ShoalError(f"write_trace: the record of PE {pe} has malformed bins (expected the "
                             "SummaryTracer.export() mapping with a width > 0 and an origin in seconds)")
        for kind, (size, at) in _SHAPES.items():
            events = full.get(kind)
            if not events:
                continue
            kept = [ev for ev in events if _well_formed(ev, size, at, kind, len(full["names"]))]
            if len(kept) < len(events):  # drop the bad events, keep the timeline
                full[kind] = kept
                bad = next(ev for ev in events if not _well_formed(ev, size, at, kind, len(full["names"])))
                dropped.note(pe, kind, len(events) - len(kept), bad)
        for key in ("start", "end"):  # where absent: the first and the last event
            value = full.get(key)
            if value is None:
                value = min(times(full), default=0.0) if key == "start" else max(times(full), default=0.0)
            if not finite(value):
                raise ShoalError(f"write_trace: the record of PE {pe} has {key}={value!r}; "
                                 "it must be a finite number of seconds")
            full[key] = float(value)
        out.append(full)
    return sorted(out, key=lambda r: r["pe"])


#: per list of a record: its tuples' length and the places of their times
_SHAPES = {"entries": (3, (1, 2)), "idle": (2, (0, 1)), "sends": (3, (0,)), "migrations": (6, (0, 1)),
           "balances": (5, (0, 1)), "marks": (3, (1,)), "futures": (4, (0, 1)),
           "queue": (2, (0,)), "sent": (4, (0,)), "delivered": (4, (0,)), "caused": (4, (0, 1))}
#: the lists whose tuples may hold one item more (an entry's element, a round's reason)
_LONGER = ("entries", "balances")
_WHY = {
    "entries": "expected (index into names, t0, t1[, element index]), finite seconds with t0 <= t1",
    "idle": "expected (t0, t1), finite seconds with t0 <= t1",
    "sends": "expected (t, dest_pe, nbytes), t finite seconds",
    "migrations": "expected (t0, t1, what, src_pe, dst_pe, nbytes), finite seconds with t0 <= t1",
    "balances": "expected (t0, t1, collection, moved, strategy[, reason dict]), finite seconds with t0 <= t1",
    "marks": "expected (name, t, args dict or None), t finite seconds",
    "futures": "expected (t_made, t_value, number, origin), finite seconds with t_made <= t_value",
    "queue": "expected (t, length), t finite seconds, length an int >= 0",
    "sent": "expected (t, dest_pe, nbytes, number), t finite seconds, the rest ints >= 0",
    "delivered": "expected (t, src_pe, nbytes, number), t finite seconds, the rest ints >= 0",
    "caused": "expected (t0, t1, src_pe, number), finite seconds with t0 <= t1, PE and number ints >= 0",
}
#: the lists of a message's frames (trace_messages): ints from the given place on
_INTS = {"sent": 1, "delivered": 1, "caused": 2}


def _well_formed(ev: object, size: int, at: tuple[int, ...], kind: str, names: int) -> bool:
    if not isinstance(ev, (tuple, list)) or not (len(ev) == size or kind in _LONGER and len(ev) == size + 1):
        return False
    when = [ev[i] for i in at]
    if not all(map(finite, when)) or (len(when) == 2 and when[0] > when[1]):
        return False
    if kind == "entries":
        return isinstance(ev[0], int) and 0 <= ev[0] < names
    if kind == "marks":
        return ev[2] is None or isinstance(ev[2], Mapping)
    if kind == "queue":
        return isinstance(ev[1], int) and ev[1] >= 0
    if kind in _INTS:
        return all(type(x) is int and x >= 0 for x in ev[_INTS[kind]:])
    if kind == "balances" and len(ev) > size:
        return ev[size] is None or isinstance(ev[size], Mapping)
    return True


def finite(x: object) -> bool:
    """``x`` is a finite int or float (not a bool)."""
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def times(rec: Mapping[str, Any]) -> Iterator[float]:
    """Every start or instant time of ``rec``, and every end time (own clock)."""
    for ev in rec["entries"]:
        yield ev[1]
        yield ev[2]
    for ev in (*rec["idle"], *rec["migrations"], *rec["balances"], *rec.get("futures", ())):
        yield ev[0]
        yield ev[1]
    for ev in (*rec["sends"], *rec.get("queue", ()), *rec.get("sent", ()), *rec.get("delivered", ())):
        yield ev[0]
    for ev in rec["marks"]:
        yield ev[1]



