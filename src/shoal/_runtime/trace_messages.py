"""Message arrows and bytes in flight: each send paired with the runs it caused and
with its delivery.

With a full timeline and the compiled frames (``_native/frames_trace.c``) every PE
numbers the frames it sends to each PE and the frames it takes in from each PE (the
transport keeps each pair's order, so the k-th frame a sends to b is the k-th b takes
from a), and records each send ``(t, dest, nbytes, k)``, each delivery to its runtime
``(t, src, nbytes, k)`` and each run of an entry method during a delivery ``(t0, t1,
src, k)``. A message is then ``(a, b, k)`` on both sides: :func:`pair` matches them,
:func:`message_events` writes each (send, run) pair as a Chrome trace flow (``"ph": "s"``
bound to a short ``send`` slice on the sender's track, ``"ph": "f"`` with ``"bp": "e"``
bound to the run's slice) and, per receiving PE, a ``PE n bytes in flight`` counter: the
bytes sent to it and not yet delivered, from each send to its delivery.
"""

from __future__ import annotations

from typing import Any, Iterator, Mapping, Sequence

from .tracing import MESSAGE, TRACE_PID

__all__ = ["Messages", "pair", "message_events", "in_flight", "causes", "FLOW_BASE"]

#: message flows' ids start here (migration flows count from 1: the two never meet)
FLOW_BASE = 1 << 40

Key = tuple[int, int, int]  # (source PE, destination PE, number)


class Messages:
    """Every numbered message of a trace, paired: sends, deliveries and the runs caused,
    each keyed ``(src, dst, number)``, times in seconds of the job's shared time line."""

    __slots__ = ("sends", "deliveries", "runs", "skewed", "skew")

    def __init__(self) -> None:
        self.sends: dict[Key, tuple[float, int]] = {}  # (t, nbytes)
        self.deliveries: dict[Key, float] = {}
        self.runs: list[tuple[Key, float, float]] = []  # (message, t0, t1) on the destination
        #: deliveries earlier than their send on the shared time line (the PEs' clocks
        #: disagree by more than the message took), and the largest disagreement (s)
        self.skewed = 0
        self.skew = 0.0

    def arrows(self) -> list[tuple[Key, float, float, float]]:
        """``(message, t_send, t0, t1)`` for each run whose message's send was recorded."""
        sends = self.sends
        return [(key, sends[key][0], t0, t1) for key, t0, t1 in self.runs if key in sends]

    def description(self) -> dict[str, Any]:
        """For ``otherData.shoal.messages``: counts, and what the clocks' disagreement cost."""
        arrows = len(self.arrows())
        return {"sent": len(self.sends), "delivered": len(self.deliveries), "runs_caused": len(self.runs),
                "arrows": arrows, "runs_without_send": len(self.runs) - arrows,
                "delivered_before_sent": self.skewed, "largest_skew_us": round(self.skew * 1e6, 3)}


def pair(records: Sequence[Mapping[str, Any]], base: float = 0.0) -> Messages:
    """The numbered messages of checked ``records`` (those without ``sent`` have none),
    with times made ``base``-relative seconds as the slices' are."""
    m = Messages()
    for rec in records:
        pe, shift = rec["pe"], rec["offset"] - base
        for t, dst, nbytes, k in rec.get("sent", ()):
            m.sends[pe, dst, k] = (t + shift, nbytes)
        for t, src, _, k in rec.get("delivered", ()):
            m.deliveries[src, pe, k] = t + shift
        m.runs += [((src, pe, k), t0 + shift, t1 + shift) for t0, t1, src, k in rec.get("caused", ())]
    for key, t in m.deliveries.items():
        sent = m.sends.get(key)
        if sent is not None and t < sent[0]:
            m.skewed += 1
            m.skew = max(m.skew, sent[0] - t)
    return m


def in_flight(m: Messages) -> dict[int, list[tuple[float, int]]]:
    """Per destination PE, ``(t, bytes in flight to it)`` at each change: each message
    from its send to its delivery (one delivered before it was sent, by the clocks'
    disagreement, counts for no time; one never delivered, to the end)."""
    steps: dict[int, list[tuple[float, int]]] = {}
    for key, (t, nbytes) in m.sends.items():
        if not nbytes:
            continue
        got = m.deliveries.get(key)
        out = steps.setdefault(key[1], [])
        out.append((t, nbytes))
        if got is not None:
            out.append((max(t, got), -nbytes))
    track: dict[int, list[tuple[float, int]]] = {}
    for dst, changes in steps.items():
        changes.sort(key=lambda c: (c[0], c[1] > 0))  # at one instant, deliveries first
        level = 0
        points: list[tuple[float, int]] = []
        for t, d in changes:
            level += d
            if points and points[-1][0] == t:
                points[-1] = (t, level)
            else:
                points.append((t, level))
        track[dst] = points
    return track


def message_events(m: Messages) -> Iterator[str]:
    """The JSON text of each arrow (a ``send`` slice of 1 ns on the sender's track, bound
    to the flow's start, and the flow's end in the run it caused) and each PE's bytes in
    flight, times µs on the shared time line of :func:`pair`."""
    for n, ((src, dst, k), ts, t0, t1) in enumerate(m.arrows(), start=FLOW_BASE):
        sent = f"{ts * 1e6:.3f}"
        yield (f'{{"name":"send","cat":"{MESSAGE}","ph":"X","ts":{sent},"dur":0.001,"pid":{TRACE_PID},'
               f'"tid":{src + 1},"args":{{"to":{dst},"number":{k},"bytes":{m.sends[src, dst, k][1]}}}}}')
        yield f'{{"name":"message","cat":"{MESSAGE}","ph":"s","id":{n},"ts":{sent},"pid":{TRACE_PID},"tid":{src + 1}}}'
        yield (f'{{"name":"message","cat":"{MESSAGE}","ph":"f","bp":"e","id":{n},"ts":{(t0 + t1) / 2 * 1e6:.3f},'
               f'"pid":{TRACE_PID},"tid":{dst + 1}}}')
    for dst, points in sorted(in_flight(m).items()):
        where = f'"ph":"C","pid":{TRACE_PID},"tid":{dst + 1}'
        for t, level in points:
            yield f'{{"name":"PE {dst} bytes in flight",{where},"ts":{t * 1e6:.3f},"args":{{"bytes":{level}}}}}'


def causes(records: Sequence[Mapping[str, Any]], m: Messages) -> dict[int, dict[tuple[float, float], tuple[int, float]]]:
    """Per PE, each run a recorded send caused, by its own times ``(t0, t1)`` as its
    record holds them -> (sending PE, send time on :func:`pair`'s time line): the run's
    slice names them (its ``args.from``), for a viewer with no arrows."""
    out: dict[int, dict[tuple[float, float], tuple[int, float]]] = {}
    for rec in records:
        pe = rec["pe"]
        for t0, t1, src, k in rec.get("caused", ()):
            sent = m.sends.get((src, pe, k))
            if sent is not None:
                out.setdefault(pe, {})[t0, t1] = (src, sent[0])
    return out
