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
it): ``(phase, round, quick)``. ``phase`` is FREE, SYNCED (in at_sync, not reported yet),
REPORTED (in a READY report, waiting for RESUME) or RESUMING (its resume_from_sync is
queued); ``round`` numbers the at_sync rounds it took part in; ``quick`` counts
resume_from_sync calls queued without a round (no strategy, or not the period's turn).
Rounds of migrate() can move an element in any phase, so the state is the element's, not
the PE's: a PE's counters follow the elements that leave and land (``_departed``,
``_landed``), and a queued resume_from_sync runs where the element is when its turn comes
(on the PE it left, the queued call finds it gone and does nothing; the PE it lands on
queues it again). RESUME names its round, and resumes only the elements REPORTED in that
round: an element resumed elsewhere may land, and sync again, before this PE has seen the
RESUME of the round it left (issue 41).
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
from .lb_period import AUTO, interval, next_floor, next_period
from .message import Kind, decode
from .round_log import KEPT, RoundRecord, prepare

if TYPE_CHECKING:
    from .chare import Chare
    from .collections import CollectionState
    from .runtime import Runtime

__all__ = ["Balancer", "READY", "PLAN", "MOVED", "RESUME", "REQUEST", "COMM_SAMPLE", "record_comm", "sync_state"]

READY, PLAN, MOVED, RESUME, REQUEST = range(5)  # the phase, in the entry field of BALANCE messages

#: an element's phase in its sync state (``Chare._shoal_synced``: ``(phase, round, quick)``)
FREE, SYNCED, REPORTED, RESUMING = range(4)
_NEVER = (FREE, 0, 0)


def sync_state(el: Any) -> tuple:
    """``(phase, round, quick)`` of ``el``: see the module's docstring. An element that
    never called at_sync() (``False``) is FREE, before round 1."""
    s = el._shoal_synced
    return s if type(s) is tuple else _NEVER


def _set_sync(el: Any, phase: int, rnd: int, quick: int) -> None:
    """Set ``el``'s sync state (``Chare._shoal_synced``, False until its first at_sync())."""
    el._shoal_synced = (phase, rnd, quick)

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


def _plan16(number: int) -> int:
    """A plan's number as a MIGRATE message carries it: 1 .. 0xFFFF (0 means none)."""
    return (number - 1) % 0xFFFF + 1 if number > 0 else 0


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


def _reason(name: str, loads: Any, placement: Any, new: Any, speeds: Any, said: Any) -> dict:
    """A round's reason for the trace: the strategy's own (``said``: auto's) with the moves
    and the predicted imbalance of ``new`` (pinned elements kept), else measured here."""
    from .strategies import TOLERANCE
    from .strategy_reasons import judge

    if said is None:
        return judge(name, loads, placement, new, speeds, TOLERANCE).as_args()
    return judge(name, loads, placement, new, speeds, said.threshold - 1.0, said.plan, said.why, said.saved, said.cost,
                 said.weighed).as_args()


class _Round:
    """One PE's state in the balancing of one Array (the coordinator's part too)."""

    __slots__ = ("synced", "waiting", "gen", "since", "idle_since", "busy_since", "awaiting", "landed", "plan", "early", "reports",
                 "reported", "pending", "held", "busy", "number", "requests", "started", "moves", "resume", "lb_rounds",
                 "reason", "record", "period", "residual", "floor")

    def __init__(self, now: float, idle: float):
        self.synced = 0  # local elements SYNCED (in at_sync, not reported yet)
        self.waiting = 0  # local elements REPORTED (waiting for their round's RESUME)
        self.gen = 1  # the at_sync round after the last RESUME this PE saw
        self.since, self.idle_since = now, idle  # wall clock and idle total at the last round
        self.busy_since = 0.0  # the PE's busy total then
        self.awaiting: set | None = None  # elements the current plan sends here, not arrived yet (None: no plan here)
        #: elements that arrived before this PE saw the plan that moved them (it comes down
        #: the tree, they come from the PE they left: with 3 PEs or more, either may be first)
        self.landed: set = set()
        self.plan = 0  # the last plan this PE saw
        #: elements that came before the plan that moved them: (plan, header, segments)
        self.early: list = []
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
        self.resume = 0  # the at_sync round under way, which ends with its RESUME (0: a migrate() round)
        self.lb_rounds = 0  # at_sync rounds decided
        self.reason: dict | None = None  # what the strategy of the round under way decided and why (traced)
        self.record: RoundRecord | None = None  # the at_sync round under way, as the history keeps it
        self.period = 1  # --lb-period auto: the at_sync calls per element in the interval under way
        self.residual = 0.0  # --lb-period auto: the loss per at_sync the last placement left (s)
        self.floor: float | None = None  # --lb-period auto: the running mean of idle time per at_sync (s)


class Balancer:
    """One PE's part in balancing rounds."""

    def __init__(self, rt: "Runtime"):
        self.rt = rt
        self.rounds: dict[int, _Round] = {}
        self.holding: set[int] = set()  # Arrays whose broadcasts this PE (their root) holds
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
        phase, rnd, quick = sync_state(el)
        if phase != FREE:
            raise ShoalError(f"{el!r} called at_sync() again before its resume_from_sync() ran")
        n = el._shoal_syncs = el._shoal_syncs + 1
        period = rt.settings.lb_period
        if not rt.settings.lb or (period > 0 and n % period) or (period == AUTO and n < el._shoal_lb_due):
            _set_sync(el, FREE, rnd, quick + 1)  # no round this time: resumes where it is then
            rt.ready.append(functools.partial(self._quick_resume, el))
            return
        cs = rt.colls.get(info.id)
        if cs is None:  # shoal.destroy() removed it while this element ran
            _set_sync(el, SYNCED, rnd + 1, quick)
            return
        st = self.state(info.id)
        _set_sync(el, SYNCED, max(rnd + 1, st.gen), quick)  # gen: an element inserted late
        st.synced += 1
        self._maybe_ready(cs, st)

    def _maybe_ready(self, cs: "CollectionState", st: _Round) -> None:
        """Report this PE's SYNCED elements once every element here is SYNCED or REPORTED."""
        if not st.synced or st.synced + st.waiting < len(cs.elements):
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
        for _, el in elements:
            _, rnd, quick = sync_state(el)
            _set_sync(el, REPORTED, rnd, quick)
        st.synced = 0
        st.waiting += len(elements)
        rt.post(cs.info.root, Kind.BALANCE, READY, 0, cs.info.id, (), report)

    def _here(self, el: "Chare") -> bool:
        """Whether ``el`` is this PE's element still (not a copy left by a departure)."""
        cs = self.rt.colls.get(el.collection._info.id)
        return cs is not None and cs.elements.get(el.index) is el

    def _resume(self, el: "Chare") -> None:
        """The resume_from_sync() a RESUME queued, unless ``el`` left meanwhile (then the
        PE it landed on queued it again, :meth:`_landed`)."""
        phase, rnd, quick = sync_state(el)
        if phase != RESUMING or not self._here(el):
            return
        _set_sync(el, FREE, rnd, quick)
        self.rt.run_method(el, type(el).resume_from_sync, (), None, None)

    def _quick_resume(self, el: "Chare") -> None:
        """The resume_from_sync() of an at_sync() without a round, where ``el`` is now."""
        phase, rnd, quick = sync_state(el)
        if quick <= 0 or not self._here(el):
            return
        _set_sync(el, phase, rnd, quick - 1)
        self.rt.run_method(el, type(el).resume_from_sync, (), None, None)

    # -- elements that move (migration.py's hooks) ------------------------------------------
    def _departed(self, cs: "CollectionState", el: "Chare") -> None:
        """``el`` left this PE (its sync state goes with it)."""
        phase = sync_state(el)[0]
        st = self.rounds.get(cs.info.id)
        if st is None:
            return
        if phase == SYNCED:
            st.synced -= 1
        elif phase == REPORTED:
            st.waiting -= 1
        self._maybe_ready(cs, st)  # the elements left here may all be in at_sync now

    def _landed(self, cs: "CollectionState", el: "Chare") -> None:
        """``el`` arrived here (before its migrated() and any message for it runs)."""
        phase, _, quick = sync_state(el)
        if phase == FREE and not quick:
            return
        rt = self.rt
        st = self.state(cs.info.id)
        if phase == RESUMING:
            rt.ready.append(functools.partial(self._resume, el))
        for _ in range(quick):
            rt.ready.append(functools.partial(self._quick_resume, el))
        if phase == REPORTED:
            st.waiting += 1
        elif phase == SYNCED:
            st.synced += 1
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
            self._on_ready(cs, payload)
        elif entry == PLAN:
            self._on_plan(cs, *payload)
        elif entry == MOVED:
            self._on_moved(cs, src)
        elif entry == RESUME:
            self._on_resume(cs, *payload)
        elif entry == REQUEST:
            st = self.state(coll)
            st.requests.append(payload)
            if not st.busy:
                self._start_requests(cs, st)

    def _on_resume(self, cs: "CollectionState", number: int, period: int) -> None:
        """At_sync round ``number`` is over: queue resume_from_sync() of the elements here
        that took part in it (not one that landed and synced again for the next round);
        with ``--lb-period auto`` each balances again after ``period`` more at_sync calls."""
        st = self.state(cs.info.id)
        auto = self.rt.settings.lb_period == AUTO
        st.gen = max(st.gen, number + 1)
        ready = self.rt.ready
        for el in list(cs.elements.values()):
            phase, rnd, quick = sync_state(el)
            if phase == REPORTED and rnd == number:
                _set_sync(el, RESUMING, rnd, quick)
                if auto:
                    el._shoal_lb_due = el._shoal_syncs + period
                st.waiting -= 1
                ready.append(functools.partial(self._resume, el))

    def _on_ready(self, cs: "CollectionState", report: tuple) -> None:
        st = self.state(cs.info.id)
        st.reports.append(report)
        st.reported += len(report[1])
        if st.reported < cs.size:
            return
        st.record = RoundRecord(st.lb_rounds + 1, perf_counter())
        if st.busy:  # a migrate() round is under way: this one starts when it ends
            return
        self._decide(cs, st)

    def _decide(self, cs: "CollectionState", st: _Round) -> None:
        import numpy as np

        from .strategies import REASONED, CommGraph, background_speeds, check_placement
        from .strategy_registry import get_strategy

        rt = self.rt
        modules = len(sys.modules)
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
        seen: set[int] = set()
        for r in reports:  # a PE whose elements moved while it reported may send several
            if r[0] not in seen:
                seen.add(r[0])
                wall[r[0]], busy[r[0]], idle[r[0]] = 0.0, 0.0, 0.0
            wall[r[0]] += r[3]
            busy[r[0]] += r[4]
            idle[r[0]] += r[5]
        # background load (other processes on a PE's core, the main program, the runtime's
        # own work) as a PE's speed: busy / (wall - idle) since the last round. Not in the
        # first round (start-up is no measure) nor where PEs share one process and take turns
        measured = st.number > 0 and len(rt.engine.runtimes) == 1
        speeds = background_speeds(wall, busy, idle) if measured else np.ones(rt.npes)
        position = {index: i for i, index in enumerate(indices)}
        edges = [(position[s], position[d], m, b) for r in reports for s, d, m, b in r[6] if d in position]
        comm = CommGraph(*(np.array([e[k] for e in edges], np.int64) for k in range(4))) if edges else CommGraph.empty()
        options = {}
        if reports and all(r[8] is not None for r in reports):  # the PEs measured them: the strategy takes sizes
            options["sizes"] = np.concatenate([r[8] for r in reports])
        reasoned = REASONED.get(strategy) if rt.tracer is not None else None
        try:
            if reasoned is not None:
                placed, reason = reasoned(loads, comm, placement, rt.npes, speeds, **options)
            else:
                placed, reason = strategy(loads, comm, placement, rt.npes, speeds, **options), None
            new = check_placement(placed, len(indices), rt.npes, name)
        except Exception as exc:  # noqa: BLE001 - a user's strategy: its error ends the job, named
            rt.fail(exc, f"load-balancing strategy {name!r} on the Array of {cs.info.cls.__qualname__}")
            return
        first = np.cumsum([0] + [len(r[1]) for r in reports[:-1]])
        pinned = [int(at) + i for r, at in zip(reports, first) for i in r[7]]
        new[pinned] = placement[pinned]  # elements that are not migratable stay
        moved = np.nonzero(new != placement)[0]
        moves = [(indices[i], int(placement[i]), int(new[i])) for i in moved]
        st.lb_rounds += 1
        if rt.tracer is not None:  # what the strategy decided and why, for the trace
            st.reason = _reason(name, loads, placement, new, speeds, reason)
        record = st.record = st.record or RoundRecord(st.lb_rounds, perf_counter())
        record.number, record.moves = st.lb_rounds, len(moves)
        if "sizes" in options:
            record.moved_bytes = float(options["sizes"][moved].sum())
        if rt.settings.lb_period == AUTO:  # the interval that ends here, and what the new placement leaves
            # idle time: not where PEs share one process and take turns (each sees the process's)
            waited = idle if len(rt.engine.runtimes) == 1 else None
            record.measured = interval(loads, placement, speeds, st.period, st.residual, waited, st.floor)
            st.floor = next_floor(record.measured) if waited is not None else None
            st.residual = interval(loads, new, speeds, st.period, 0.0).lost / max(st.period, 1)
        record.imported = sum(r[9] for r in reports) + len(sys.modules) - modules
        record.decided = perf_counter()
        self._start(cs, st, moves, resume=st.lb_rounds)

    def _start_requests(self, cs: "CollectionState", st: _Round) -> None:
        last = dict(st.requests)  # requests that queued up: each element to the last PE asked
        moves = [(index, -1, pe) for index, pe in last.items()]
        st.requests = []
        st.reason = None
        self._start(cs, st, moves, resume=0)

    def _start(self, cs: "CollectionState", st: _Round, moves: list, resume: int) -> None:
        rt = self.rt
        st.busy = True
        st.number += 1
        st.started = perf_counter()
        st.moves, st.resume = len(moves), resume
        st.pending = {dst for _, _, dst in moves}
        self.holding.add(cs.info.id)
        payload = (st.number, moves, bool(resume))
        rt.post(rt.pe, Kind.BALANCE, PLAN, 0, cs.info.id, (), payload)  # down the tree from here, the root
        if not st.pending:
            self._finish(cs, st)

    def _before_plan(self, cs: "CollectionState", index: tuple, plan: int, header: bytes, segments: list) -> bool:
        """An element came that plan ``plan`` (its 16-bit number) moved: True if this PE
        has not seen that plan yet, and keeps the element until it has. A broadcast the
        root sent before the plan may not have reached this PE yet (the element left a PE
        that had run it; with 3 PEs or more the element may come first): landing before
        the plan, the element would run it twice."""
        st = self.state(cs.info.id)
        ahead = (plan - _plan16(st.plan)) % 0xFFFF
        if ahead == 0 or ahead >= 0x8000:  # this plan, or an earlier one: seen
            return False
        st.early.append((plan, header, segments))
        self.rt.locations.expect(cs.info, index, parked=True)  # its messages wait here with it
        return True

    def _on_plan(self, cs: "CollectionState", number: int, moves: list, resume: bool) -> None:
        rt = self.rt
        st = self.state(cs.info.id)
        info = cs.info
        st.plan = number
        awaiting = set()
        for index, src, dst in moves:
            # where the element is, not where a READY report saw it (``src``): a round of
            # migrate() may have moved it since, and every earlier move is over by now
            here = index in cs.elements
            if dst == rt.pe:
                if index in st.landed:  # this plan's move, already done
                    st.landed.discard(index)
                elif not here:
                    awaiting.add(index)
                    rt.locations.expect(info, index)
            elif here:
                try:
                    rt.migration.depart(cs, index, dst, _plan16(number))
                except ShoalError as exc:
                    rt.fail(exc, f"moving element {index if len(index) > 1 else index[0]} of {info.cls.__qualname__}")
                    return
        if any(dst == rt.pe for _, _, dst in moves):
            st.awaiting = awaiting
            self._maybe_moved(cs, st)
        if st.early:  # elements this plan moved that came before it: they land now
            mine = _plan16(number)
            early, st.early = st.early, []
            for plan, header, segments in early:
                if plan == mine:
                    rt.dispatch(header, segments)
                else:
                    st.early.append((plan, header, segments))

    def _arrived(self, cs: "CollectionState", el: "Chare") -> None:
        st = self.state(cs.info.id)
        if st.awaiting is not None and el.index in st.awaiting:
            st.awaiting.discard(el.index)
            self._maybe_moved(cs, st)
        else:  # before the plan that moved it: that plan finds it here
            st.landed.add(el.index)

    def _maybe_moved(self, cs: "CollectionState", st: _Round) -> None:
        """MOVED to the root once every element the plan sends here is in (not before: a
        broadcast released by the round's end must find it here)."""
        if st.awaiting is None or st.awaiting:
            return
        st.awaiting = None
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
            rt.tracer.balance(st.started, perf_counter(), cs.info.cls.__qualname__, st.moves,
                              rt.settings.lb if st.resume else "migrate()", st.reason)
        if st.resume:
            period = self._log_round(st)
            rt.post(rt.pe, Kind.BALANCE, RESUME, 0, cs.info.id, (), (st.resume, period))
        st.busy = False
        self.holding.discard(cs.info.id)
        held, st.held = st.held, []
        for header, segments in held:
            rt.dispatch(header, segments)
        if st.requests:
            self._start_requests(cs, st)
        elif st.reported >= cs.size:
            self._decide(cs, st)

    def _log_round(self, st: _Round) -> int:
        """Keep the record of the at_sync round that ends now; with ``--lb-period auto``
        return the next period (at_sync calls until the next round), chosen from the
        interval the round measured and the round's cost, else 0."""
        record, st.record = st.record, None
        if record is None:
            return 0
        record.finished = perf_counter()
        if record.measured is not None:
            record.period = st.period = next_period(record.measured, record.finished - record.ready)
        self.history.append(record)
        if len(self.history) > KEPT:
            del self.history[: len(self.history) - KEPT]
        return record.period

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
            if cs is not None and (st.synced or st.waiting):
                lines.append(
                    f"PE {self.rt.pe}: {st.synced + st.waiting} of its {len(cs.elements)} element(s) of "
                    f"{cs.info.cls.__qualname__} wait in at_sync() for the others ({st.waiting} reported to "
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

