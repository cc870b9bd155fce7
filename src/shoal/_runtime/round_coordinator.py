"""The coordinator's decisions in one Array's balancing rounds: events in, actions out, no I/O.

The coordinator of an Array (its root PE) runs its rounds one at a time. This state
machine decides them; :class:`.balancing.Balancer` turns messages into its events and
its actions into sends and calls, as :mod:`.butterfly` does for the all-reduce. Events:

- :meth:`Coordinator.ready`: a PE's READY report (opaque here: the engine reads it);
  once the reports count every element of the Array, the at_sync round is ready, and
  decided as soon as no round is under way;
- :meth:`Coordinator.decided`: the strategy's moves for the reports of a DECIDE action
  (the engine runs the strategy: NumPy, the clock, the tracer are its);
- :meth:`Coordinator.request`: one ``arr.migrate(index, pe)``; the requests that queue
  up while a round is under way become one migrate() round after it;
- :meth:`Coordinator.moved`: a PE's MOVED (every element the plan sends it is in);
- :meth:`Coordinator.hold`: a broadcast to the Array, held while a round is under way.

Actions are tuples, their first item one of the names below: :data:`DECIDE` (run the
strategy on these reports), :data:`HOLD` (hold the Array's broadcasts from now on),
:data:`SEND_PLAN` (send the plan down the tree), :data:`ENDED` (the round is over: for
the trace), :data:`KEEP` (keep this round record), :data:`SEND_RESUME` (send RESUME down
the tree), :data:`RELEASE` (stop holding and let these broadcasts go). Times (``now``) come
from the engine; with ``--lb-period auto`` the period an at_sync round's RESUME carries
is chosen here from what the engine measured (:func:`.lb_period.next_period`).
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing is for type checkers: a PE's start-up skips its import
if TYPE_CHECKING:
    from typing import Any

from .lb_period import next_period
from .round_log import RoundRecord

__all__ = ["Coordinator", "DECIDE", "HOLD", "SEND_PLAN", "ENDED", "KEEP", "SEND_RESUME", "RELEASE"]

#: ``(DECIDE, reports)``: run the strategy on these READY reports, then call :meth:`Coordinator.decided`
DECIDE = "decide"
#: ``(HOLD,)``: hold new broadcasts to the Array (at its root) until :data:`RELEASE`
HOLD = "hold"
#: ``(SEND_PLAN, number, moves, resume)``: send plan ``number`` down the tree; ``moves`` are
#: ``(index, from PE or -1, to PE)``; ``resume``: an at_sync round's plan (else migrate()'s)
SEND_PLAN = "send plan"
#: ``(ENDED, started, moves, resume, reason)``: the round that started at ``started`` ends
#: now (``resume``: the at_sync round's number, 0 for migrate()); what the trace records
ENDED = "ended"
#: ``(KEEP, record)``: the :class:`.round_log.RoundRecord` of the at_sync round that ended
KEEP = "keep"
#: ``(SEND_RESUME, number, period)``: send RESUME of at_sync round ``number`` down the tree,
#: with the period (at_sync calls until the next round) of ``--lb-period auto``, else 0
SEND_RESUME = "send resume"
#: ``(RELEASE, held)``: stop holding the Array's broadcasts and let ``held`` go, in order
RELEASE = "release"


class Coordinator:
    """The coordinator's state in the balancing of one Array, and its decisions."""

    __slots__ = ("reports", "reported", "busy", "number", "lb_rounds", "pending", "held", "requests", "resume",
                 "moves", "started", "reason", "record", "period", "residual", "floor")

    def __init__(self) -> None:
        self.reports: list = []  # READY reports of the at_sync round not decided yet
        self.reported = 0  # the elements they count
        self.busy = False  # a round is under way (from its PLAN to its end)
        self.number = 0  # plans sent (every round has one)
        self.lb_rounds = 0  # at_sync rounds decided
        self.pending: set[int] = set()  # PEs whose MOVED is awaited
        self.held: list = []  # broadcasts held until the round ends
        self.requests: list = []  # arr.migrate() moves, (index, pe), waiting for the round under way
        self.resume = 0  # the at_sync round under way, which ends with its RESUME (0: a migrate() round)
        self.moves = 0  # the moves of the round under way
        self.started = 0.0  # when the round under way sent its plan
        self.reason: Any = None  # what the strategy of the round under way decided and why (traced)
        self.record: RoundRecord | None = None  # the at_sync round under way, as the history keeps it
        self.period = 1  # --lb-period auto: the at_sync calls per element in the interval under way
        self.residual = 0.0  # --lb-period auto: the loss per at_sync the last placement left (s)
        self.floor: float | None = None  # --lb-period auto: the running mean of idle time per at_sync (s)

    # -- events ----------------------------------------------------------------------------
    def ready(self, report: Any, elements: int, size: int, now: float) -> list:
        """A READY report of ``elements`` elements of the Array's ``size``: DECIDE once
        they are all in and no round is under way (else when it ends)."""
        self.reports.append(report)
        self.reported += elements
        if self.reported < size:
            return []
        self.record = RoundRecord(self.lb_rounds + 1, now)
        if self.busy:  # a migrate() round is under way: this one starts when it ends
            return []
        return self._decide()

    def decided(self, moves: list, size: int, now: float, *, reason: Any = None, moved_bytes: float = 0.0,
                imported: int = 0, measured: Any = None, residual: float = 0.0, floor: float | None = None) -> list:
        """The strategy's ``moves`` (``(index, from, to)``) for the last DECIDE: start the
        at_sync round. ``reason`` is for the trace; ``moved_bytes``, ``imported`` and, with
        ``--lb-period auto``, the interval ``measured`` go into the round's record, and the
        ``residual`` loss and idle ``floor`` the engine measures the next interval with."""
        self.lb_rounds += 1
        self.reason = reason
        record = self.record = self.record or RoundRecord(self.lb_rounds, now)
        record.number, record.moves, record.moved_bytes = self.lb_rounds, len(moves), moved_bytes
        if measured is not None:
            record.measured = measured
            self.floor, self.residual = floor, residual
        record.imported = imported
        record.decided = now
        return self._start(moves, self.lb_rounds, size, now)

    def request(self, index: Any, pe: int, size: int, now: float) -> list:
        """``arr.migrate(index, pe)``: a migrate() round now, or after the round under way."""
        self.requests.append((index, pe))
        return [] if self.busy else self._start_requests(size, now)

    def moved(self, pe: int, size: int, now: float) -> list:
        """PE ``pe``'s MOVED: the round ends with the last one."""
        self.pending.discard(pe)
        if self.pending or not self.busy:
            return []
        return self._finish(size, now)

    def hold(self, broadcast: Any) -> bool:
        """Keep ``broadcast`` until the round under way ends; False if none is."""
        if not self.busy:
            return False
        self.held.append(broadcast)
        return True

    # -- decisions ---------------------------------------------------------------------------
    def _decide(self) -> list:
        reports, self.reports, self.reported = self.reports, [], 0
        return [(DECIDE, reports)]

    def _start_requests(self, size: int, now: float) -> list:
        last = dict(self.requests)  # requests that queued up: each element to the last PE asked
        self.requests = []
        self.reason = None
        return self._start([(index, -1, pe) for index, pe in last.items()], 0, size, now)

    def _start(self, moves: list, resume: int, size: int, now: float) -> list:
        self.busy = True
        self.number += 1
        self.started = now
        self.moves, self.resume = len(moves), resume
        self.pending = {dst for _, _, dst in moves}
        actions: list = [(HOLD,), (SEND_PLAN, self.number, moves, bool(resume))]
        if not self.pending:
            actions.extend(self._finish(size, now))
        return actions

    def _finish(self, size: int, now: float) -> list:
        actions: list = [(ENDED, self.started, self.moves, self.resume, self.reason)]
        if self.resume:
            record, self.record = self.record, None
            period = 0
            if record is not None:
                record.finished = now
                if record.measured is not None:
                    record.period = self.period = next_period(record.measured, record.finished - record.ready)
                period = record.period
                actions.append((KEEP, record))
            actions.append((SEND_RESUME, self.resume, period))
        self.busy = False
        held, self.held = self.held, []
        actions.append((RELEASE, held))
        if self.requests:
            actions.extend(self._start_requests(size, now))
        elif self.reported >= size:
            actions.extend(self._decide())
        return actions
