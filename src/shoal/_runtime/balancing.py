"""Load balancing rounds: at_sync, a strategy's new placement, migration, resume_from_sync.

A round of one Array is run by its *coordinator*, the PE that created it (the root of
its broadcasts):

1. every element calls ``at_sync()``; once all elements of a PE have, the PE sends the
   coordinator a READY report: their loads since the last round (time inside entry
   methods, :mod:`.receiving`), and its wall, busy and idle time (background load);
2. the coordinator runs the strategy (:mod:`.strategies`) and sends the PLAN down the
   broadcast tree; from then until the round ends it holds new broadcasts to the Array,
   so every broadcast reaches every element exactly once: those sent before the plan
   reach each PE before it, and the elements leave after them;
3. each PE sends its departing elements (:mod:`.migration`); each PE that receives
   elements sends MOVED once they are all in;
4. the coordinator sends RESUME down the tree (each element's ``resume_from_sync()``
   runs) and lets the held broadcasts go.

``arr.migrate(index, pe)`` is a round of one move without at_sync or resume. Rounds of
one Array run one at a time. With a period (``SHOAL_LB_PERIOD=N``) only every N-th
at_sync balances; the others resume at once, without a round.
"""

from __future__ import annotations

import functools
from time import perf_counter

TYPE_CHECKING = False  # typing is for type checkers: a PE's start-up skips its import
if TYPE_CHECKING:
    from typing import Any

from ..lazy_numpy import np

from ..errors import ShoalError
from .message import Kind, decode

if TYPE_CHECKING:
    from .chare import Chare
    from .collections import CollectionState
    from .scheduler import Runtime

__all__ = ["Balancer", "READY", "PLAN", "MOVED", "RESUME", "REQUEST", "COMM_SAMPLE", "record_comm"]

READY, PLAN, MOVED, RESUME, REQUEST = range(5)  # the phase, in the entry field of BALANCE messages

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


class _Round:
    """One PE's state in the balancing of one Array (the coordinator's part too)."""

    __slots__ = ("synced", "since", "idle_since", "busy_since", "expected", "arrived", "reports", "reported",
                 "pending", "held", "busy", "number", "requests", "started", "moves", "resume")

    def __init__(self, now: float, idle: float):
        self.synced = 0  # local elements waiting in at_sync
        self.since, self.idle_since = now, idle  # wall clock and idle total at the last round
        self.busy_since = 0.0  # the PE's busy total then
        self.expected = -1  # arrivals the current plan sends here (-1: no plan here yet)
        self.arrived = 0
        # the coordinator's part
        self.reports: list = []
        self.reported = 0
        self.pending: set[int] = set()  # PEs whose MOVED is awaited
        self.held: list = []  # broadcasts held until the round ends
        self.busy = False
        self.number = 0
        self.requests: list = []  # arr.migrate() moves waiting for the round under way
        self.started = 0.0
        self.moves = 0
        self.resume = False  # the round under way ends with resume_from_sync()


class Balancer:
    """One PE's part in balancing rounds."""

    def __init__(self, rt: "Runtime"):
        self.rt = rt
        self.rounds: dict[int, _Round] = {}
        self.holding: set[int] = set()  # Arrays whose broadcasts this PE (their root) holds
        self.started = perf_counter()
        rt.migration.on_arrival = self._arrived

    def state(self, coll: int) -> _Round:
        st = self.rounds.get(coll)
        if st is None:  # the first round measures from the start of the job
            st = self.rounds[coll] = _Round(self.started, 0.0)
        return st

    # -- at_sync --------------------------------------------------------------------
    def at_sync(self, el: "Chare") -> None:
        rt = self.rt
        info = el.collection._info
        if info.kind == "group":
            raise ShoalError(
                f"at_sync() on {el!r}: the elements of a Group stay on their PE; balancing moves elements of an Array"
            )
        if el._shoal_synced:
            raise ShoalError(f"{el!r} called at_sync() again before its resume_from_sync() ran")
        n = el._shoal_syncs = el._shoal_syncs + 1
        period = rt.settings.lb_period
        if not rt.settings.lb or (period > 0 and n % period):
            rt.ready.append(functools.partial(self._resume, el))  # no round this time
            return
        el._shoal_synced = True
        cs = rt.colls.get(info.id)
        if cs is None:  # shoal.destroy() removed it while this element ran
            return
        st = self.state(info.id)
        st.synced += 1
        self._maybe_ready(cs, st)

    def _maybe_ready(self, cs: "CollectionState", st: _Round) -> None:
        if st.synced < len(cs.elements) or not st.synced:
            return
        rt = self.rt
        elements = list(cs.elements.items())
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
        report = (rt.pe, [index for index, _ in elements], loads, now - st.since, busy - st.busy_since,
                  idle - st.idle_since, edges, pinned)
        st.since, st.idle_since, st.busy_since = now, idle, busy
        st.synced = 0
        rt.post(cs.info.root, Kind.BALANCE, READY, 0, cs.info.id, (), report)

    def _resume(self, el: "Chare") -> None:
        el._shoal_synced = False
        self.rt.run_method(el, type(el).resume_from_sync, (), None, None)

    # -- arr.migrate(index, pe) -------------------------------------------------------
    def request(self, info: Any, index: tuple, pe: int) -> None:
        rt = self.rt
        if info.kind == "group":
            raise ShoalError(f"migrate() on a Group of {info.cls.__qualname__}: Group elements stay on their PE")
        if not isinstance(pe, (int, np.integer)) or not 0 <= pe < rt.npes:
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
            self._on_ready(cs, payload)
        elif entry == PLAN:
            self._on_plan(cs, *payload)
        elif entry == MOVED:
            self._on_moved(cs, src)
        elif entry == RESUME:
            for el in list(cs.elements.values()):
                if el._shoal_synced:
                    rt.ready.append(functools.partial(self._resume, el))
        elif entry == REQUEST:
            st = self.state(coll)
            st.requests.append(payload)
            if not st.busy:
                self._start_requests(cs, st)

    def _on_ready(self, cs: "CollectionState", report: tuple) -> None:
        st = self.state(cs.info.id)
        st.reports.append(report)
        st.reported += len(report[1])
        if st.reported < cs.size:
            return
        if st.busy:  # a migrate() round is under way: this one starts when it ends
            return
        self._decide(cs, st)

    def _decide(self, cs: "CollectionState", st: _Round) -> None:
        from .strategies import CommGraph, background_speeds, check_placement, get_strategy  # a job that balances

        rt = self.rt
        reports, st.reports, st.reported = st.reports, [], 0
        name = rt.settings.lb
        try:
            strategy = get_strategy(name)
        except ShoalError as exc:
            rt.fail(exc, f"balancing the Array of {cs.info.cls.__qualname__}")
            return
        indices = [index for r in reports for index in r[1]]
        placement = np.concatenate([np.full(len(r[1]), r[0], np.int64) for r in reports])
        loads = np.concatenate([r[2] for r in reports])
        wall, busy, idle = np.ones(rt.npes), np.ones(rt.npes), np.zeros(rt.npes)
        for r in reports:
            wall[r[0]], busy[r[0]], idle[r[0]] = r[3], r[4], r[5]
        # background load (other processes on a PE's core, the main program, the runtime's
        # own work) as a PE's speed: busy / (wall - idle) since the last round. Not in the
        # first round (start-up is no measure) nor where PEs share one process and take turns
        measured = st.number > 0 and len(rt.engine.runtimes) == 1
        speeds = background_speeds(wall, busy, idle) if measured else np.ones(rt.npes)
        position = {index: i for i, index in enumerate(indices)}
        edges = [(position[s], position[d], m, b) for r in reports for s, d, m, b in r[6] if d in position]
        comm = CommGraph(*(np.array([e[k] for e in edges], np.int64) for k in range(4))) if edges else CommGraph.empty()
        try:
            new = check_placement(strategy(loads, comm, placement, rt.npes, speeds), len(indices), rt.npes, name)
        except Exception as exc:  # noqa: BLE001 - a user's strategy: its error ends the job, named
            rt.fail(exc, f"load-balancing strategy {name!r} on the Array of {cs.info.cls.__qualname__}")
            return
        first = np.cumsum([0] + [len(r[1]) for r in reports[:-1]])
        pinned = [int(at) + i for r, at in zip(reports, first) for i in r[7]]
        new[pinned] = placement[pinned]  # elements that are not migratable stay
        moved = np.nonzero(new != placement)[0]
        moves = [(indices[i], int(placement[i]), int(new[i])) for i in moved]
        self._start(cs, st, moves, resume=True)

    def _start_requests(self, cs: "CollectionState", st: _Round) -> None:
        last = dict(st.requests)  # requests that queued up: each element to the last PE asked
        moves = [(index, -1, pe) for index, pe in last.items()]
        st.requests = []
        self._start(cs, st, moves, resume=False)

    def _start(self, cs: "CollectionState", st: _Round, moves: list, resume: bool) -> None:
        rt = self.rt
        st.busy = True
        st.number += 1
        st.started = perf_counter()
        st.moves, st.resume = len(moves), resume
        st.pending = {dst for _, _, dst in moves}
        self.holding.add(cs.info.id)
        payload = (st.number, moves, resume)
        rt.post(rt.pe, Kind.BALANCE, PLAN, 0, cs.info.id, (), payload)  # down the tree from here, the root
        if not st.pending:
            self._finish(cs, st)

    def _on_plan(self, cs: "CollectionState", number: int, moves: list, resume: bool) -> None:
        rt = self.rt
        st = self.state(cs.info.id)
        info = cs.info
        expected = 0
        for index, src, dst in moves:
            here = index in cs.elements
            if dst == rt.pe and not here:
                expected += 1
                rt.locations.expect(info, index)
            elif here and dst != rt.pe and (src == rt.pe or src < 0):
                try:
                    rt.migration.depart(cs, index, dst)
                except ShoalError as exc:
                    rt.fail(exc, f"moving element {index if len(index) > 1 else index[0]} of {info.cls.__qualname__}")
                    return
        if any(dst == rt.pe for _, _, dst in moves):
            st.expected = expected
            self._maybe_moved(cs, st)

    def _arrived(self, cs: "CollectionState", el: "Chare") -> None:
        st = self.state(cs.info.id)
        st.arrived += 1
        self._maybe_moved(cs, st)

    def _maybe_moved(self, cs: "CollectionState", st: _Round) -> None:
        if st.expected < 0 or st.arrived < st.expected:
            return
        st.arrived -= st.expected
        st.expected = -1
        self.rt.post(cs.info.root, Kind.BALANCE, MOVED, 0, cs.info.id, (), None)

    def _on_moved(self, cs: "CollectionState", src: int) -> None:
        st = self.state(cs.info.id)
        st.pending.discard(src)
        if st.pending or not st.busy:
            return
        self._finish(cs, st)

    def _finish(self, cs: "CollectionState", st: _Round) -> None:
        rt = self.rt
        if rt.tracer is not None:
            rt.tracer.balance(st.started, perf_counter(), cs.info.cls.__qualname__, st.moves, rt.settings.lb or "migrate()")
        if st.resume:
            rt.post(rt.pe, Kind.BALANCE, RESUME, 0, cs.info.id, (), None)
        st.busy = False
        self.holding.discard(cs.info.id)
        held, st.held = st.held, []
        for header, segments in held:
            rt.dispatch(header, segments)
        if st.requests:
            self._start_requests(cs, st)
        elif st.reported >= cs.size:
            self._decide(cs, st)

    def hold(self, coll: int, header: bytes, segments: list) -> bool:
        """Keep a broadcast to ``coll`` (at its root) until its round ends; False if none is under way."""
        if coll not in self.holding:
            return False
        self.rounds[coll].held.append((header, segments))
        return True

    def waiting_report(self) -> list[str]:
        """Lines for a deadlock report: Arrays whose elements wait in at_sync for the others."""
        lines = []
        for coll, st in self.rounds.items():
            cs = self.rt.colls.get(coll)
            if cs is not None and st.synced:
                lines.append(
                    f"PE {self.rt.pe}: {st.synced} of its {len(cs.elements)} element(s) of {cs.info.cls.__qualname__} "
                    "wait in at_sync() for the others"
                )
        return lines

