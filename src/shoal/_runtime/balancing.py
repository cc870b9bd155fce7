"""Load balancing rounds: at_sync, a strategy's new placement, migration, resume_from_sync.

A round of one Array is run by its *coordinator*, the PE that created it (the root of
its broadcasts):

1. every element calls ``at_sync()``; once all elements of a PE have, the PE sends the
   coordinator a READY report: their loads since the last round (time inside entry
   methods, :mod:`.receiving`), and its wall, busy and idle time (background load);
2. the coordinator runs the strategy (found by name in :mod:`.strategy_registry`) and
   sends the PLAN down the broadcast tree; from then until the round ends it holds new
   broadcasts to the Array, so every broadcast reaches every element exactly once: those
   sent before the plan reach each PE before it, and the elements leave after them;
3. each PE sends its departing elements (:mod:`.migration`); each PE that receives
   elements sends MOVED once they are all in;
4. the coordinator sends RESUME down the tree (each element's ``resume_from_sync()``
   runs) and lets the held broadcasts go.

``arr.migrate(index, pe)`` is a round of one move without at_sync or resume. Rounds of
one Array run one at a time. With a period (``SHOAL_LB_PERIOD=N``) only every N-th
at_sync balances; the others resume at once, without a round. With ``SHOAL_LB_PERIOD=auto``
the coordinator chooses the period at the end of each round (:mod:`.lb_period`) and
RESUME carries it: each element it resumes balances again after that many more at_sync
calls (``Chare._shoal_lb_due``, which moves with it). The coordinator keeps a record of
each round (:mod:`.round_log`, ``Balancer.history``).

An element's part in this is its *sync state* (``Chare._shoal_synced``, which moves with
it: FREE, SYNCED, REPORTED or RESUMING, the at_sync round, queued resumes; see
:mod:`.round_pe`). Rounds of migrate() can move an element in any phase, so a PE's counts
follow the elements that leave and land, and RESUME names its round (issue 41).

The decisions live in two state machines without I/O, tested without processes: the
coordinator's (:mod:`.round_coordinator`: reports counted, plans, MOVED, RESUME and its
period, held broadcasts) and a PE's (:mod:`.round_pe`: when it reports, what a plan makes
it do, which elements a RESUME resumes). :class:`Balancer` is their engine: it turns
messages and migration's hooks into their events and their actions into sends and calls,
measures loads and times, and runs the strategy (:mod:`.round_strategy`).
"""

from __future__ import annotations

import functools
import sys
from time import perf_counter

TYPE_CHECKING = False  # typing is for type checkers: a PE's start-up skips its import
if TYPE_CHECKING:
    from typing import Any

from ..numpy_types import integer
from ..errors import ShoalError
from .lb_period import AUTO
from .message import Kind, decode
from .round_coordinator import DECIDE, ENDED, HOLD, KEEP, RELEASE, SEND_PLAN, SEND_RESUME, Coordinator
from .round_log import KEPT, RoundRecord, prepare
from .round_pe import (DEPART, EXPECT, FREE, LAND, NEVER, SEND_MOVED, SYNCED, PeRounds, balances, quick_resumed,
                       resumed, skipped)
from .round_strategy import decide

if TYPE_CHECKING:
    from .chare import Chare
    from .collections import CollectionState
    from .runtime import Runtime

__all__ = ["Balancer", "READY", "PLAN", "MOVED", "RESUME", "REQUEST", "COMM_SAMPLE", "record_comm", "sync_state"]

READY, PLAN, MOVED, RESUME, REQUEST = range(5)  # the phase, in the entry field of BALANCE messages



def sync_state(el: Any) -> tuple:
    """``(phase, round, quick)`` of ``el`` (:mod:`.round_pe`). An element that never
    called at_sync() (``False``) is FREE, before round 1."""
    s = el._shoal_synced
    return s if type(s) is tuple else NEVER


def _set_sync(el: Any, state: tuple) -> None:
    """Set ``el``'s sync state (``Chare._shoal_synced``, False until its first at_sync())."""
    el._shoal_synced = state

#: one send in this many between elements is recorded for the communication graph
#: (and counted this many times); the compiled core samples at the same rate (core.h)
COMM_SAMPLE = 64


def record_comm(el: Any, proxy: Any, nbytes: int) -> None:
    """A sampled send from element ``el`` to the element of ``proxy``: counted
    :data:`COMM_SAMPLE` times on ``el`` (the edges of the next READY report)."""
    if el is None or el.collection._info.kind == "group":
        return
    edges = el._shoal_comm
    if edges is None:
        edges = el._shoal_comm = {}
    key = (proxy._info.id, proxy._index)
    edge = edges.get(key)
    if edge is None:
        edges[key] = [COMM_SAMPLE, COMM_SAMPLE * nbytes]
    else:
        edge[0] += COMM_SAMPLE
        edge[1] += COMM_SAMPLE * nbytes


def state_bytes(el: "Chare") -> float:
    """About how many bytes moving ``el`` sends: its NumPy arrays and bytes (attributes of
    its own, and in short lists and dicts of them) and a fixed part for the rest."""
    total = 512.0
    for v in getattr(el, "__dict__", {}).values():
        items = v.values() if isinstance(v, dict) else v if isinstance(v, (list, tuple)) else (v,)
        if len(items) > 64:  # a long container of small objects: not what makes a move costly
            continue
        for item in items:
            nbytes = getattr(item, "nbytes", None)
            if isinstance(nbytes, int):
                total += nbytes
            elif isinstance(item, (bytes, bytearray)):
                total += len(item)
    return total


class _Array:
    """This PE's part in the balancing of one Array: its side's state machine, the
    coordinator's (used on the Array's root), and what its READY reports measure from."""

    __slots__ = ("pe", "coord", "since", "idle_since", "busy_since")

    def __init__(self, now: float, idle: float):
        self.pe = PeRounds()
        self.coord = Coordinator()
        self.since, self.idle_since = now, idle  # wall clock and idle total at the last report
        self.busy_since = 0.0  # the PE's busy total then


class Balancer:
    """One PE's part in balancing rounds: the engine of :mod:`.round_pe` and :mod:`.round_coordinator`."""

    def __init__(self, rt: "Runtime"):
        self.rt = rt
        self.rounds: dict[int, _Array] = {}
        self.holding: set[int] = set()  # Arrays whose broadcasts this PE (their root) holds (read by the core)
        self.started = perf_counter()
        self.history: list[RoundRecord] = []  # the coordinator's last at_sync rounds (round_log.KEPT)
        rt.migration.on_arrival = self._arrived
        rt.migration.on_landing = self._landed
        rt.migration.on_departure = self._departed
        rt.migration.before_plan = self._before_plan
        if rt.settings.lb:  # a job that balances loads NumPy and its strategy now, not in its first round
            prepare(rt.settings.lb)

    def _strategy_takes_sizes(self) -> bool:
        """Whether the job's strategy weighs moves by the bytes of each element's state (auto does)."""
        from .strategy_registry import get_strategy, takes_sizes

        try:
            return takes_sizes(get_strategy(self.rt.settings.lb))
        except ShoalError:  # an unknown name: the coordinator says so when it decides
            return False

    def state(self, coll: int) -> _Array:
        """This PE's part in the balancing of Array ``coll`` (made on first use)."""
        st = self.rounds.get(coll)
        if st is None:  # the first round measures from the start of the job
            st = self.rounds[coll] = _Array(self.started, 0.0)
        return st

    # -- at_sync --------------------------------------------------------------------
    def at_sync(self, el: "Chare") -> None:
        rt = self.rt
        info = el.collection._info
        if info.kind == "group":
            raise ShoalError(
                f"at_sync() on {el!r}: the elements of a Group stay on their PE; balancing moves elements of an Array"
            )
        state = sync_state(el)
        phase, rnd, quick = state
        if phase != FREE:
            raise ShoalError(f"{el!r} called at_sync() again before its resume_from_sync() ran")
        n = el._shoal_syncs = el._shoal_syncs + 1
        if not rt.settings.lb or not balances(n, rt.settings.lb_period, el._shoal_lb_due):
            _set_sync(el, skipped(state))  # no round this time: resumes where it is then
            rt.ready.append(functools.partial(self._quick_resume, el))
            return
        cs = rt.colls.get(info.id)
        if cs is None:  # shoal.destroy() removed it while this element ran
            _set_sync(el, (SYNCED, rnd + 1, quick))
            return
        st = self.state(info.id)
        _set_sync(el, st.pe.sync(state))
        self._maybe_ready(cs, st)

    def _maybe_ready(self, cs: "CollectionState", st: _Array) -> None:
        """Report this PE's SYNCED elements once every element here is SYNCED or REPORTED."""
        if not st.pe.due(len(cs.elements)):
            return
        import numpy as np

        rt = self.rt
        modules = len(sys.modules)
        elements = [(index, el) for index, el in cs.elements.items() if sync_state(el)[0] == SYNCED]
        scale = rt.ticks.seconds_per_tick() if rt.ticks is not None else 0.0
        loads = np.empty(len(elements))
        edges: list = []
        coll = cs.info.id
        for i, (index, el) in enumerate(elements):
            counters = el._shoal_load
            if counters is None:  # made before loads were kept (no --lb then)
                loads[i] = 0.0
            else:
                loads[i] = counters[0] + counters[1] * scale
                counters[:] = 0.0
            sent, el._shoal_comm = el._shoal_comm, None
            if sent:
                edges.extend((index, dst[1], m, b) for dst, (m, b) in sent.items() if dst[0] == coll)
        now, idle = perf_counter(), rt.idle_time
        busy = rt.busy_time + (rt._core.busy * scale if rt._core is not None else 0.0)
        pinned = [i for i, (_, el) in enumerate(elements) if not el.migratable]
        sizes = np.array([state_bytes(el) for _, el in elements]) if self._strategy_takes_sizes() else None
        report = (rt.pe, [index for index, _ in elements], loads, now - st.since, busy - st.busy_since,
                  idle - st.idle_since, edges, pinned, sizes, len(sys.modules) - modules)
        st.since, st.idle_since, st.busy_since = now, idle, busy
        for (_, el), reported in zip(elements, st.pe.report([sync_state(el) for _, el in elements])):
            _set_sync(el, reported)
        rt.post(cs.info.root, Kind.BALANCE, READY, 0, cs.info.id, (), report)

    def _here(self, el: "Chare") -> bool:
        """Whether ``el`` is this PE's element still (not a copy left by a departure)."""
        cs = self.rt.colls.get(el.collection._info.id)
        return cs is not None and cs.elements.get(el.index) is el

    def _resume(self, el: "Chare") -> None:
        """The resume_from_sync() a RESUME queued, unless ``el`` left meanwhile (then the
        PE it landed on queued it again, :meth:`_landed`)."""
        state = resumed(sync_state(el))
        if state is None or not self._here(el):
            return
        _set_sync(el, state)
        self.rt.run_method(el, type(el).resume_from_sync, (), None, None)

    def _quick_resume(self, el: "Chare") -> None:
        """The resume_from_sync() of an at_sync() without a round, where ``el`` is now."""
        state = quick_resumed(sync_state(el))
        if state is None or not self._here(el):
            return
        _set_sync(el, state)
        self.rt.run_method(el, type(el).resume_from_sync, (), None, None)

    # -- elements that move (migration.py's hooks) ------------------------------------------
    def _departed(self, cs: "CollectionState", el: "Chare") -> None:
        """``el`` left this PE (its sync state goes with it)."""
        st = self.rounds.get(cs.info.id)
        if st is None:
            return
        st.pe.departed(sync_state(el))
        self._maybe_ready(cs, st)  # the elements left here may all be in at_sync now

    def _landed(self, cs: "CollectionState", el: "Chare") -> None:
        """``el`` arrived here (before its migrated() and any message for it runs)."""
        state = sync_state(el)
        if state[0] == FREE and not state[2]:
            return
        rt = self.rt
        st = self.state(cs.info.id)
        resuming, quick = st.pe.landed(state)
        if resuming:
            rt.ready.append(functools.partial(self._resume, el))
        for _ in range(quick):
            rt.ready.append(functools.partial(self._quick_resume, el))
        if state[0] == SYNCED:
            self._maybe_ready(cs, st)

    # -- arr.migrate(index, pe) -------------------------------------------------------
    def request(self, info: Any, index: tuple, pe: int) -> None:
        rt = self.rt
        if info.kind == "group":
            raise ShoalError(f"migrate() on a Group of {info.cls.__qualname__}: Group elements stay on their PE")
        if not isinstance(pe, (int, integer())) or not 0 <= pe < rt.npes:
            raise ShoalError(
                f"migrate({index if len(index) > 1 else index[0]}, {pe!r}) on the Array of {info.cls.__qualname__}: "
                f"PE {pe!r} does not exist; this job has PEs 0..{rt.npes - 1}"
            )
        rt.post(info.root, Kind.BALANCE, REQUEST, 0, info.id, (), (index, int(pe)))

    # -- messages ------------------------------------------------------------------------
    def on_balance(self, kind: int, entry: int, src: int, aux: int, coll: int, index: tuple, segments: list, header: bytes) -> None:
        rt = self.rt
        cs = rt.collection_or_defer(coll, header, segments)
        if cs is None:
            return
        if entry in (PLAN, RESUME):
            for child in rt.tree_from(cs.info.root).children:
                rt.send_raw(child, header, segments, coll)
        payload = decode(segments)
        if entry == READY:
            st = self.state(coll)
            self._act(cs, st, st.coord.ready(payload, len(payload[1]), cs.size, perf_counter()))
        elif entry == PLAN:
            self._on_plan(cs, *payload)
        elif entry == MOVED:
            st = self.state(coll)
            self._act(cs, st, st.coord.moved(src, cs.size, perf_counter()))
        elif entry == RESUME:
            self._on_resume(cs, *payload)
        elif entry == REQUEST:
            st = self.state(coll)
            self._act(cs, st, st.coord.request(payload[0], payload[1], cs.size, perf_counter()))

    def _on_resume(self, cs: "CollectionState", number: int, period: int) -> None:
        """At_sync round ``number`` is over: queue resume_from_sync() of the elements here
        that took part in it (:meth:`.round_pe.PeRounds.resume`); with ``--lb-period auto``
        each balances again after ``period`` more at_sync calls."""
        st = self.state(cs.info.id)
        auto = self.rt.settings.lb_period == AUTO
        ready = self.rt.ready
        for el, state in st.pe.resume(number, [(el, sync_state(el)) for el in cs.elements.values()]):
            _set_sync(el, state)
            if auto:
                el._shoal_lb_due = el._shoal_syncs + period
            ready.append(functools.partial(self._resume, el))

    # -- the coordinator's actions ---------------------------------------------------------
    def _act(self, cs: "CollectionState", st: _Array, actions: list) -> None:
        """Carry out the coordinator's ``actions`` (:mod:`.round_coordinator`) for Array ``cs``."""
        rt = self.rt
        coll = cs.info.id
        for action in actions:
            what = action[0]
            if what == DECIDE:
                self._decide(cs, st, action[1])
            elif what == HOLD:
                self.holding.add(coll)
            elif what == SEND_PLAN:
                rt.post(rt.pe, Kind.BALANCE, PLAN, 0, coll, (), action[1:])  # down the tree from here, the root
            elif what == ENDED:
                if rt.tracer is not None:
                    _, started, moves, resume, reason = action
                    rt.tracer.balance(started, perf_counter(), cs.info.cls.__qualname__, moves,
                                      rt.settings.lb if resume else "migrate()", reason)
            elif what == KEEP:
                self.history.append(action[1])
                if len(self.history) > KEPT:
                    del self.history[: len(self.history) - KEPT]
            elif what == SEND_RESUME:
                rt.post(rt.pe, Kind.BALANCE, RESUME, 0, coll, (), action[1:])
            elif what == RELEASE:
                self.holding.discard(coll)
                for header, segments in action[1]:
                    rt.dispatch(header, segments)

    def _decide(self, cs: "CollectionState", st: _Array, reports: list) -> None:
        """Run the strategy on the READY ``reports`` of an at_sync round (:mod:`.round_strategy`);
        the coordinator starts the round with its moves."""
        decision = decide(self.rt, cs, st.coord, reports)
        if decision is not None:
            self._act(cs, st, st.coord.decided(size=cs.size, now=perf_counter(), **decision))

    # -- a PE's actions on a plan ------------------------------------------------------------
    def _before_plan(self, cs: "CollectionState", index: tuple, plan: int, header: bytes, segments: list) -> bool:
        """An element came that plan ``plan`` moved: True if this PE has not seen that plan
        yet and keeps the element until it has (:meth:`.round_pe.PeRounds.came_early`)."""
        if not self.state(cs.info.id).pe.came_early(plan, (header, segments)):
            return False
        self.rt.locations.expect(cs.info, index, parked=True)  # its messages wait here with it
        return True

    def _on_plan(self, cs: "CollectionState", number: int, moves: list, resume: bool) -> None:
        """Plan ``number`` came: carry out what it makes this PE do (:meth:`.round_pe.PeRounds.saw_plan`)."""
        rt = self.rt
        info = cs.info
        for action in self.state(info.id).pe.saw_plan(number, moves, rt.pe, cs.elements):
            what = action[0]
            if what == DEPART:
                _, index, dst, plan = action
                try:
                    rt.migration.depart(cs, index, dst, plan)
                except ShoalError as exc:
                    rt.fail(exc, f"moving element {index if len(index) > 1 else index[0]} of {info.cls.__qualname__}")
                    return
            elif what == EXPECT:
                rt.locations.expect(info, action[1])
            elif what == SEND_MOVED:
                rt.post(info.root, Kind.BALANCE, MOVED, 0, info.id, (), None)
            elif what == LAND:
                rt.dispatch(*action[1])

    def _arrived(self, cs: "CollectionState", el: "Chare") -> None:
        """``el`` arrived (after its migrated()): MOVED if it was the last one the plan sends here."""
        for _ in self.state(cs.info.id).pe.arrived(el.index):  # SEND_MOVED: the last one the plan sends here
            self.rt.post(cs.info.root, Kind.BALANCE, MOVED, 0, cs.info.id, (), None)

    def hold(self, coll: int, header: bytes, segments: list) -> bool:
        """Keep a broadcast to ``coll`` (at its root) until its round ends; False if none is under way."""
        if coll not in self.holding:
            return False
        return self.rounds[coll].coord.hold((header, segments))

    def waiting_report(self) -> list[str]:
        """Lines for a deadlock report: Arrays whose elements wait in at_sync for the others."""
        lines = []
        for coll, st in self.rounds.items():
            cs = self.rt.colls.get(coll)
            synced, waiting = st.pe.synced, st.pe.waiting
            if cs is not None and (synced or waiting):
                lines.append(
                    f"PE {self.rt.pe}: {synced + waiting} of its {len(cs.elements)} element(s) of "
                    f"{cs.info.cls.__qualname__} wait in at_sync() for the others ({waiting} reported to "
                    f"PE {cs.info.root})"
                )
        migration = self.rt.migration
        for (coll, index), (dest, _) in migration.waiting_departures.items():
            cs = self.rt.colls.get(coll)
            el = cs.elements.get(index) if cs is not None else None
            if cs is not None and el is not None:
                fences = sorted(k for k in (el._shoal_held or {}) if k >= 0)
                sweep = migration.sweeps.get((coll, index))
                lines.append(
                    f"PE {self.rt.pe}: element {index if len(index) > 1 else index[0]} of {cs.info.cls.__qualname__} "
                    f"waits to leave for PE {dest} until the fences of PE(s) {fences} are in"
                    + (f" ({sweep[0]} of its arrival's sweep still out)" if sweep else "")
                )
        return lines
