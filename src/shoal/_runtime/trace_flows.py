"""Flow arrows of a trace: each migration from the PE it left to the PE it reached.

A migration is recorded twice, as ``migrate out`` on the PE the element left and as
``migrate in`` on the PE it reached, each with the element and the two PEs. :func:`pair`
matches them (the k-th departure of an element from PE a to PE b with its k-th arrival
there); :func:`flow_events` writes each pair as a Chrome trace flow (``"ph": "s"``
bound to the departure's slice, ``"ph": "f"`` to the arrival's), which Perfetto and
``chrome://tracing`` draw as an arrow; the report draws the same pairs on its timeline.
"""

from __future__ import annotations

from typing import Any, Iterator, Mapping, Sequence

from .tracing import MIGRATION, TRACE_PID

__all__ = ["pair", "flow_events"]


def pair(departures: Sequence[tuple[float, str, Any, Any]],
         arrivals: Sequence[tuple[float, str, Any, Any]]) -> list[tuple[int, int]]:
    """(departure, arrival) index pairs of the same element between the same two PEs,
    in time order; each entry is ``(time, element, from_pe, to_pe)``."""
    waiting: dict[tuple[str, Any, Any], list[int]] = {}
    for i in sorted(range(len(departures)), key=lambda i: departures[i][0]):
        _, element, src, dst = departures[i]
        waiting.setdefault((element, src, dst), []).append(i)
    out = []
    for j in sorted(range(len(arrivals)), key=lambda j: arrivals[j][0]):
        _, element, src, dst = arrivals[j]
        queue = waiting.get((element, src, dst))
        if queue:
            out.append((queue.pop(0), j))
    return out


def flow_events(records: Sequence[Mapping[str, Any]], base: float) -> Iterator[str]:
    """The JSON text of a flow per migration of checked ``records`` (µs from ``base``)."""
    import json

    out: list[tuple[float, str, int, int]] = []
    into: list[tuple[float, str, int, int]] = []
    for rec in records:
        shift = rec["offset"] - base  # as the slices' times are made, to the last bit
        for t0, t1, what, src, dst, _ in rec["migrations"]:
            if not (type(src) is int and type(dst) is int):
                continue  # a hand-made record: no PE to draw the arrow from
            when = (t0 + t1) / 2 + shift  # inside the slice the flow binds to
            (out if src == rec["pe"] and dst != rec["pe"] else into).append((when, str(what), src, dst))
    for k, (i, j) in enumerate(pair(out, into), start=1):
        (t_out, what, src, dst), t_in = out[i], into[j][0]
        name = json.dumps(f"migrate {what}")
        yield (f'{{"name":{name},"cat":"{MIGRATION}","ph":"s","id":{k},"ts":{t_out * 1e6:.3f},'
               f'"pid":{TRACE_PID},"tid":{src + 1}}}')
        yield (f'{{"name":{name},"cat":"{MIGRATION}","ph":"f","bp":"e","id":{k},"ts":{t_in * 1e6:.3f},'
               f'"pid":{TRACE_PID},"tid":{dst + 1}}}')
