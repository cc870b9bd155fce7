"""One PE's decisions in one Array's balancing rounds: sync states, reports, plans, resumes; no I/O.

An element's part in the rounds is its *sync state*, ``(phase, round, quick)``, which
moves with it (``Chare._shoal_synced``): ``phase`` is :data:`FREE`, :data:`SYNCED` (in
at_sync, not reported yet), :data:`REPORTED` (in a READY report, waiting for RESUME) or
:data:`RESUMING` (its resume_from_sync is queued); ``round`` numbers the at_sync rounds
it took part in; ``quick`` counts resume_from_sync calls queued without a round. The
functions here take a state and return the next one; :class:`PeRounds` counts a PE's
elements by phase and decides when the PE reports, which elements a RESUME resumes, and
what a PLAN makes this PE do (actions: tuples whose first item is :data:`EXPECT`,
:data:`DEPART`, :data:`SEND_MOVED` or :data:`LAND`). :class:`.balancing.Balancer` reads and
writes the elements and sends the messages.

Elements move in any phase (rounds of migrate() do not wait for at_sync), so a PE's
counts follow the elements that leave and land (:meth:`PeRounds.departed`,
:meth:`PeRounds.landed`), and a queued resume_from_sync runs where the element is when
its turn comes (on the PE it left, the queued call finds it gone and does nothing; the
PE it lands on queues it again). RESUME names its round, and resumes only the elements
REPORTED in that round: an element resumed elsewhere may land, and sync again, before
this PE has seen the RESUME of the round it left (issue 41).
An element may also come before the plan that moved it (the plan comes down the tree,
the element from the PE it left): :meth:`PeRounds.came_early` keeps it until the plan is here.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing is for type checkers: a PE's start-up skips its import
if TYPE_CHECKING:
    from typing import Any, Container, Iterable

from .lb_period import AUTO

__all__ = ["FREE", "SYNCED", "REPORTED", "RESUMING", "NEVER", "EXPECT", "DEPART", "SEND_MOVED", "LAND", "PeRounds",
           "balances", "plan16", "skipped", "resumed", "quick_resumed"]

#: an element's phase in its sync state
FREE, SYNCED, REPORTED, RESUMING = range(4)
#: the sync state of an element that never called at_sync(): FREE, before round 1
NEVER = (FREE, 0, 0)

#: ``(EXPECT, index)``: this plan sends element ``index`` here; it is not here yet
EXPECT = "expect"
#: ``(DEPART, index, to, plan)``: send element ``index`` to PE ``to``, in plan ``plan`` (16 bits)
DEPART = "depart"
#: ``(SEND_MOVED,)``: every element the plan sends here is in: send MOVED to the coordinator
SEND_MOVED = "send moved"
#: ``(LAND, item)``: an element that came before this plan lands now (``item`` as :meth:`PeRounds.came_early` took it)
LAND = "land"


def plan16(number: int) -> int:
    """A plan's number as a MIGRATE message carries it: 1 .. 0xFFFF (0 means none)."""
    return (number - 1) % 0xFFFF + 1 if number > 0 else 0


def balances(syncs: int, period: int, due: int) -> bool:
    """Whether an element's ``syncs``-th at_sync() takes part in a round: every one, every
    ``period``-th, or (``--lb-period auto``) from the call ``due`` on."""
    return not (period > 0 and syncs % period) and not (period == AUTO and syncs < due)


def skipped(state: tuple) -> tuple:
    """The state after an at_sync() without a round: its resume_from_sync() is queued."""
    phase, rnd, quick = state
    return (phase, rnd, quick + 1)


def resumed(state: tuple) -> tuple | None:
    """The state once a resume_from_sync() that a RESUME queued runs; None: it does not
    run (the element is not RESUMING: a copy of one that left)."""
    phase, rnd, quick = state
    return (FREE, rnd, quick) if phase == RESUMING else None


def quick_resumed(state: tuple) -> tuple | None:
    """The state once a resume_from_sync() of an at_sync() without a round runs; None: none is due."""
    phase, rnd, quick = state
    return (phase, rnd, quick - 1) if quick > 0 else None


class PeRounds:
    """One PE's state in the balancing of one Array, and its decisions."""

    __slots__ = ("synced", "waiting", "gen", "plan", "awaiting", "before_plan", "early")

    def __init__(self) -> None:
        self.synced = 0  # elements here SYNCED (in at_sync, not reported yet)
        self.waiting = 0  # elements here REPORTED (waiting for their round's RESUME)
        self.gen = 1  # the at_sync round after the last RESUME this PE saw
        self.plan = 0  # the last plan this PE saw
        self.awaiting: set | None = None  # elements the current plan sends here, not arrived yet (None: no plan here)
        #: elements that arrived before this PE saw the plan that moved them (it comes down
        #: the tree, they come from the PE they left: with 3 PEs or more, either may be first)
        self.before_plan: set = set()
        #: elements that came before the plan that moved them: (plan, item)
        self.early: list = []

    # -- at_sync, READY, RESUME ------------------------------------------------------------
    def sync(self, state: tuple) -> tuple:
        """An element here calls at_sync() for a round: its state, SYNCED for the round after
        its last one (or after the last RESUME here, if it was inserted later)."""
        _, rnd, quick = state
        self.synced += 1
        return (SYNCED, max(rnd + 1, self.gen), quick)

    def due(self, elements: int) -> bool:
        """Whether this PE, with ``elements`` elements here, reports its SYNCED ones now:
        some are, and every element here is SYNCED or REPORTED."""
        return bool(self.synced) and self.synced + self.waiting >= elements

    def report(self, states: list) -> list:
        """The SYNCED elements' ``states`` go in a READY report: their states, REPORTED."""
        self.synced = 0
        self.waiting += len(states)
        return [(REPORTED, rnd, quick) for _, rnd, quick in states]

    def resume(self, number: int, elements: Iterable[tuple[Any, tuple]]) -> list:
        """RESUME of at_sync round ``number``: of ``elements`` (``(key, state)``, the ones
        here) those REPORTED in that round, as ``(key, state)`` with their state RESUMING
        (not one that landed and synced again for a later round)."""
        self.gen = max(self.gen, number + 1)
        out = []
        for key, (phase, rnd, quick) in elements:
            if phase == REPORTED and rnd == number:
                out.append((key, (RESUMING, rnd, quick)))
        self.waiting -= len(out)
        return out

    # -- elements that move ------------------------------------------------------------------
    def departed(self, state: tuple) -> None:
        """An element in ``state`` left this PE (its state goes with it)."""
        phase = state[0]
        if phase == SYNCED:
            self.synced -= 1
        elif phase == REPORTED:
            self.waiting -= 1

    def landed(self, state: tuple) -> tuple[bool, int]:
        """An element in ``state`` landed here: whether to queue its RESUME's resume_from_sync
        here (it was RESUMING), and how many resume_from_sync calls without a round."""
        phase = state[0]
        if phase == REPORTED:
            self.waiting += 1
        elif phase == SYNCED:
            self.synced += 1
        return phase == RESUMING, state[2]

    # -- PLAN ----------------------------------------------------------------------------------
    def saw_plan(self, number: int, moves: list, pe: int, here: Container) -> list:
        """Plan ``number`` with ``moves`` (``(index, from, to)``) came to PE ``pe``, whose
        elements are ``here``: what this PE does, in order (:data:`EXPECT`, :data:`DEPART`,
        :data:`SEND_MOVED`, :data:`LAND`)."""
        self.plan = number
        mine = plan16(number)
        actions: list = []
        awaiting = set()
        for index, _, dst in moves:
            # where the element is, not where a READY report saw it (``from``): a round of
            # migrate() may have moved it since, and every earlier move is over by now
            if dst == pe:
                if index in self.before_plan:  # this plan's move, already done
                    self.before_plan.discard(index)
                elif index not in here:
                    awaiting.add(index)
                    actions.append((EXPECT, index))
            elif index in here:
                actions.append((DEPART, index, dst, mine))
        if any(dst == pe for _, _, dst in moves):
            self.awaiting = awaiting
            actions.extend(self._maybe_moved())
        if self.early:  # elements this plan moved that came before it: they land now
            early, self.early = self.early, []
            for plan, item in early:
                if plan == mine:
                    actions.append((LAND, item))
                else:
                    self.early.append((plan, item))
        return actions

    def came_early(self, plan: int, item: Any) -> bool:
        """An element came that plan ``plan`` (its 16-bit number) moved: True if this PE
        has not seen that plan yet, and keeps ``item`` until it has. A broadcast the root
        sent before the plan may not have reached this PE yet (the element left a PE that
        had run it; with 3 PEs or more the element may come first): landing before the
        plan, the element would run it twice."""
        ahead = (plan - plan16(self.plan)) % 0xFFFF
        if ahead == 0 or ahead >= 0x8000:  # this plan, or an earlier one: seen
            return False
        self.early.append((plan, item))
        return True

    def arrived(self, index: Any) -> list:
        """Element ``index`` arrived (after its migrated()): MOVED if it was the last one
        the current plan sends here; else it came before the plan that moved it, which
        then finds it here."""
        if self.awaiting is not None and index in self.awaiting:
            self.awaiting.discard(index)
            return self._maybe_moved()
        self.before_plan.add(index)
        return []

    def _maybe_moved(self) -> list:
        """MOVED once every element the plan sends here is in (not before: a broadcast
        released by the round's end must find it here)."""
        if self.awaiting is None or self.awaiting:
            return []
        self.awaiting = None
        return [(SEND_MOVED,)]
