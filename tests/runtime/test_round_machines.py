"""Balancing rounds' state machines (round_coordinator, round_pe), without processes: N
PEs in lists, their messages in FIFO channels delivered in an order the test picks, the
elements' programs (at_sync, then at_sync again in resume_from_sync) run by hand."""

from __future__ import annotations

import random
import subprocess
import sys
from collections import deque

import pytest

from shoal._runtime.lb_period import AUTO, LONGEST, Interval, next_period
from shoal._runtime.round_coordinator import (DECIDE, ENDED, HOLD, KEEP, RELEASE, SEND_PLAN, SEND_RESUME,
                                              Coordinator)
from shoal._runtime.round_pe import (DEPART, EXPECT, FREE, LAND, NEVER, REPORTED, RESUMING, SEND_MOVED, SYNCED,
                                     PeRounds, balances, plan16, quick_resumed, resumed, skipped)


class _El:
    """An element: its sync state and at_sync count travel with it, as on a Chare."""

    def __init__(self, index: int):
        self.index, self.state, self.syncs, self.due, self.resumes = index, NEVER, 0, 1, 0
        self.left_from, self.left_round = -1, 0  # the PE it left last, and its at_sync round then


class _Job:
    """The engine of balancing.py in miniature: PE 0 coordinates; PLAN and RESUME go from
    it to every PE (one FIFO channel per pair of PEs, as MPI keeps order per pair)."""

    def __init__(self, npes: int, nels: int, seed: int, syncs: int, period: int = 0, requests: int = 0,
                 drift: float = 0.0):
        self.rng = random.Random(seed)
        self.npes, self.n, self.total, self.period, self.requests, self.drift = npes, nels, syncs, period, requests, drift
        self.coord = Coordinator()
        self.pes = [PeRounds() for _ in range(npes)]
        self.elements: list[dict] = [{} for _ in range(npes)]
        self.channels: dict = {}
        self.queues: list[deque] = [deque() for _ in range(npes)]
        self.now = 0.0
        self.holding = False
        self.plans: list = []  # (number, moves, resume) as the coordinator sent them
        self.resumes: list = []  # (number, period)
        self.history: list = []
        self.decided: list = []  # the elements each DECIDE had reports of
        self.seen_resume: list[list] = [[] for _ in range(npes)]
        self.synced_before_old_pe_resumed = 0
        for i in range(nels):
            self.elements[i % npes][i] = _El(i)

    # -- the harness ---------------------------------------------------------------------------
    def send(self, src: int, dst: int, msg: tuple) -> None:
        self.channels.setdefault((src, dst), deque()).append(msg)

    def run(self) -> "_Job":
        starts = [(pe, el) for pe in range(self.npes) for el in self.elements[pe].values()]
        self.rng.shuffle(starts)
        for pe, el in starts:
            self.at_sync(pe, el)
        while True:
            if self.requests and self.rng.random() < 0.05:
                self.requests -= 1
                self.send(self.rng.randrange(self.npes), 0, ("request", self.rng.randrange(self.n), self.rng.randrange(self.npes)))
            ready = [("q", pe) for pe in range(self.npes) if self.queues[pe]]
            ready += [("c", key) for key, ch in self.channels.items() if ch]
            if not ready:
                if self.requests:
                    continue
                break
            self.now += 1.0
            where, key = self.rng.choice(ready)
            if where == "q":
                what, el = self.queues[key].popleft()
                self.run_resume(key, el, what)
            else:
                self.deliver(key[0], key[1], self.channels[key].popleft())
        return self

    # -- a PE's engine -------------------------------------------------------------------------
    def at_sync(self, pe: int, el: _El) -> None:
        assert el.state[0] == FREE, f"at_sync() of {el.index} in {el.state}"
        el.syncs += 1
        if not balances(el.syncs, self.period, el.due):
            el.state = skipped(el.state)
            self.queues[pe].append(("quick", el))
            return
        if el.left_from >= 0 and self.pes[el.left_from].gen <= el.left_round:
            self.synced_before_old_pe_resumed += 1  # its old PE has not seen the RESUME of the round it left
        el.state = self.pes[pe].sync(el.state)
        self.maybe_ready(pe)

    def maybe_ready(self, pe: int) -> None:
        if not self.pes[pe].due(len(self.elements[pe])):
            return
        synced = [el for el in self.elements[pe].values() if el.state[0] == SYNCED]
        for el, state in zip(synced, self.pes[pe].report([el.state for el in synced])):
            el.state = state
        self.send(pe, 0, ("ready", pe, [el.index for el in synced]))

    def run_resume(self, pe: int, el: _El, what: str) -> None:
        state = (resumed if what == "resume" else quick_resumed)(el.state)
        if state is None or self.elements[pe].get(el.index) is not el:
            return  # it left: the PE it landed on queued it again
        el.state = state
        el.resumes += 1
        if el.syncs < self.total:
            self.at_sync(pe, el)

    def land(self, pe: int, el: _El) -> None:
        self.elements[pe][el.index] = el
        if el.state[0] != FREE or el.state[2]:
            resuming, quick = self.pes[pe].landed(el.state)
            if resuming:
                self.queues[pe].append(("resume", el))
            self.queues[pe].extend([("quick", el)] * quick)
            if el.state[0] == SYNCED:
                self.maybe_ready(pe)
        for action in self.pes[pe].arrived(el.index):
            assert action == (SEND_MOVED,)
            self.send(pe, 0, ("moved",))

    def deliver(self, src: int, pe: int, msg: tuple) -> None:
        what = msg[0]
        if what == "plan":
            _, number, moves, resume = msg
            for action in self.pes[pe].saw_plan(number, moves, pe, self.elements[pe]):
                if action[0] == DEPART:
                    el = self.elements[pe].pop(action[1])
                    el.left_from, el.left_round = pe, el.state[1]
                    self.pes[pe].departed(el.state)
                    self.send(pe, action[2], ("element", action[3], el))
                    self.maybe_ready(pe)
                elif action[0] == SEND_MOVED:
                    self.send(pe, 0, ("moved",))
                elif action[0] == LAND:
                    self.land(pe, action[1])
                else:
                    assert action[0] == EXPECT and action[1] not in self.elements[pe]
        elif what == "element":
            _, plan, el = msg
            if not self.pes[pe].came_early(plan, el):
                self.land(pe, el)
        elif what == "resume":
            _, number, period = msg
            self.seen_resume[pe].append(number)
            for el, state in self.pes[pe].resume(number, [(el, el.state) for el in self.elements[pe].values()]):
                el.state = state
                if self.period == AUTO:
                    el.due = el.syncs + period
                self.queues[pe].append(("resume", el))
        elif what == "ready":
            self.act(self.coord.ready((msg[1], msg[2]), len(msg[2]), self.n, self.now))
        elif what == "moved":
            self.act(self.coord.moved(src, self.n, self.now))
        elif what == "request":
            self.act(self.coord.request(msg[1], msg[2], self.n, self.now))

    # -- the coordinator's engine --------------------------------------------------------------
    def act(self, actions: list) -> None:
        for action in actions:
            what = action[0]
            if what == DECIDE:
                self.decide(action[1])
            elif what == HOLD:
                assert not self.holding, "a round started before the last one ended"
                self.holding = True
            elif what == SEND_PLAN:
                assert self.holding and action[1] == len(self.plans) + 1
                self.plans.append(action[1:])
                for pe in range(self.npes):
                    self.send(0, pe, ("plan", *action[1:]))
            elif what == SEND_RESUME:
                self.resumes.append(action[1:])
                for pe in range(self.npes):
                    self.send(0, pe, ("resume", *action[1:]))
            elif what == KEEP:
                self.history.append(action[1])
            elif what == RELEASE:
                assert self.holding and action[1] == []
                self.holding = False
            else:
                assert what == ENDED

    def decide(self, reports: list) -> None:
        """A strategy that sends each element to a random PE; the interval a stable (or drifting) load measures."""
        indices = [i for _, r in reports for i in r]
        self.decided.append(sorted(indices))
        moves = [(i, pe, self.rng.randrange(self.npes)) for pe, r in reports for i in r]
        moves = [m for m in moves if m[1] != m[2]]
        measured = Interval(self.coord.period, self.drift * self.coord.period ** 2, 1.0, 0.0) if self.period == AUTO else None
        self.act(self.coord.decided(moves, self.n, self.now, measured=measured))

    def check_done(self) -> None:
        """Every at_sync resumed once, every element on one PE, nothing left under way."""
        els = [el for here in self.elements for el in here.values()]
        assert sorted(el.index for el in els) == list(range(self.n)), "an element was lost or doubled"
        assert all(el.syncs == self.total and el.resumes == self.total for el in els), \
            [(el.index, el.syncs, el.resumes) for el in els]
        assert all(el.state[0] == FREE and el.state[2] == 0 for el in els), [el.state for el in els]
        for p in self.pes:
            assert (p.synced, p.waiting, p.awaiting, p.early, p.before_plan) == (0, 0, None, [], set())
        c = self.coord
        assert not c.busy and not self.holding and not c.requests and not c.reports and not c.pending
        assert all(d == list(range(self.n)) for d in self.decided), "a round decided without every element once"
        assert [r[0] for r in self.resumes] == list(range(1, len(self.resumes) + 1))
        assert all(seen == sorted(seen) for seen in self.seen_resume)


# -- whole jobs, random orders ----------------------------------------------------------------------
@pytest.mark.parametrize("npes", [1, 2, 3, 5])
def test_every_at_sync_resumes_once_whatever_the_order_of_messages(npes):
    for seed in range(12):
        job = _Job(npes, 3 * npes + 1, seed, syncs=4).run()
        job.check_done()
        assert len(job.resumes) == 4 and len(job.history) == 4  # one round per at_sync


@pytest.mark.parametrize("npes", [2, 3, 4])
def test_migrate_rounds_interleaved_with_at_sync_rounds_lose_nothing(npes):
    migrate_rounds = 0
    for seed in range(16):
        job = _Job(npes, 2 * npes + 1, seed, syncs=5, requests=6).run()
        job.check_done()
        assert len(job.resumes) == 5
        migrate_rounds += sum(1 for plan in job.plans if not plan[2])
    assert migrate_rounds > 0, "no migrate() round ran: the test tests nothing"


def test_elements_land_and_sync_again_before_their_old_pe_sees_resume():
    """An element moves, is resumed where it lands and calls at_sync() again while the PE it
    left has not seen the RESUME of the round it left in: still every at_sync resumes once."""
    seen = 0
    for seed in range(30):
        job = _Job(3, 7, seed, syncs=4, requests=4).run()
        job.check_done()
        seen += job.synced_before_old_pe_resumed
    assert seen > 0, "no element synced again before its old PE saw its round's RESUME: the case is not exercised"


def test_a_fixed_period_balances_at_every_nth_at_sync():
    for seed in range(6):
        job = _Job(3, 7, seed, syncs=9, period=3).run()
        job.check_done()
        assert len(job.resumes) == 3 and all(r[1] == 0 for r in job.resumes)


def test_auto_period_doubles_while_the_load_is_stable_and_every_element_follows_it():
    for seed in range(6):
        job = _Job(3, 7, seed, syncs=20, period=AUTO).run()
        job.check_done()
        # rounds at the 1st, 3rd, 7th, 15th at_sync: periods 2, 4, 8, 16
        assert [r[1] for r in job.resumes] == [2, 4, 8, 16]
        assert [rec.period for rec in job.history] == [2, 4, 8, 16] and job.coord.period == 16


def test_auto_period_stays_short_while_the_load_drifts():
    job = _Job(3, 7, 1, syncs=12, period=AUTO, drift=4.0).run()
    job.check_done()
    periods = [r[1] for r in job.resumes]
    assert periods and max(periods) <= 2, periods
    rec = job.history[0]
    assert rec.period == next_period(rec.measured, rec.finished - rec.ready)


# -- the coordinator --------------------------------------------------------------------------------
def test_a_round_is_decided_once_every_element_is_reported_in_any_order():
    for seed in range(5):
        c = Coordinator()
        reports = [(pe, n) for pe, n in enumerate([3, 1, 4, 2])]
        random.Random(seed).shuffle(reports)
        for r in reports[:-1]:
            assert c.ready(r, r[1], 10, 1.0) == []
        acts = c.ready(reports[-1], reports[-1][1], 10, 2.0)
        assert acts == [(DECIDE, reports)] and c.record is not None and c.record.ready == 2.0


def test_a_plan_that_moves_nothing_ends_the_round_at_once():
    c = Coordinator()
    c.ready("r", 2, 2, 0.0)
    acts = c.decided([], 2, 1.0)
    assert [a[0] for a in acts] == [HOLD, SEND_PLAN, ENDED, KEEP, SEND_RESUME, RELEASE]
    assert acts[1] == (SEND_PLAN, 1, [], True) and acts[4] == (SEND_RESUME, 1, 0) and not c.busy


def test_the_round_ends_with_the_last_moved_of_the_pes_that_receive():
    c = Coordinator()
    c.ready("r", 3, 3, 0.0)
    c.decided([("a", 0, 1), ("b", 0, 2), ("c", 1, 2)], 3, 1.0)
    assert c.moved(2, 3, 2.0) == [] and c.busy
    acts = c.moved(1, 3, 3.0)
    assert acts[0] == (ENDED, 1.0, 3, 1, None) and (SEND_RESUME, 1, 0) in acts and not c.busy
    assert c.moved(1, 3, 4.0) == []  # a MOVED of no round


def test_broadcasts_are_held_while_a_round_is_under_way_and_go_in_order():
    c = Coordinator()
    assert not c.hold("b0")
    c.request("x", 1, 4, 0.0)
    assert c.hold("b1") and c.hold("b2")
    acts = c.moved(1, 4, 1.0)
    assert acts[-1] == (RELEASE, ["b1", "b2"]) and not c.hold("b3")


def test_requests_during_a_round_become_one_migrate_round_after_it_each_to_the_last_pe_asked():
    c = Coordinator()
    acts = c.request("x", 1, 4, 0.0)
    assert acts == [(HOLD,), (SEND_PLAN, 1, [("x", -1, 1)], False)]
    assert c.request("y", 2, 4, 1.0) == [] and c.request("x", 3, 4, 1.0) == [] and c.request("y", 0, 4, 1.0) == []
    acts = c.moved(1, 4, 2.0)
    assert [a[0] for a in acts] == [ENDED, RELEASE, HOLD, SEND_PLAN]  # no RESUME for migrate()
    assert acts[-1] == (SEND_PLAN, 2, [("y", -1, 0), ("x", -1, 3)], False) and c.pending == {0, 3}


def test_an_at_sync_round_ready_during_a_migrate_round_is_decided_after_it():
    c = Coordinator()
    c.request("x", 1, 2, 0.0)
    assert c.ready("r0", 1, 2, 1.0) == [] and c.ready("r1", 1, 2, 2.0) == []  # all in, but a round is under way
    acts = c.moved(1, 2, 3.0)
    assert acts[-1] == (DECIDE, ["r0", "r1"]) and c.record is not None and c.record.ready == 2.0
    acts = c.decided([], 2, 4.0)
    assert (SEND_RESUME, 1, 0) in acts and c.number == 2 and c.lb_rounds == 1


def test_the_auto_period_is_chosen_at_the_round_end_from_its_measure_and_cost():
    c = Coordinator()
    c.ready("r", 1, 1, 10.0)
    drifting = Interval(1, 5.0, 1.0, 0.0)
    acts = c.decided([("x", 0, 1)], 1, 11.0, measured=drifting, residual=0.5, floor=0.25)
    assert c.residual == 0.5 and c.floor == 0.25
    acts = c.moved(1, 1, 18.0)
    period = next_period(drifting, 8.0)
    assert (SEND_RESUME, 1, period) in acts and c.period == period and acts[1][1].period == period
    assert c.ready("r", 1, 1, 20.0) and c.decided([], 1, 21.0, measured=Interval(period, 0.0, 1.0, 0.0))[-2][2] == \
        min(2 * period, LONGEST)


# -- a PE -------------------------------------------------------------------------------------------
def test_a_pe_reports_once_every_element_is_synced_or_reported():
    p = PeRounds()
    a = p.sync(NEVER)
    assert a == (SYNCED, 1, 0) and not p.due(3)
    b = p.sync(NEVER)
    assert not p.due(3)
    p.departed(NEVER)  # the third, still FREE, leaves: the two left here are all in at_sync
    assert p.due(2) and p.report([a, b]) == [(REPORTED, 1, 0)] * 2 and (p.synced, p.waiting) == (0, 2)
    assert not p.due(2)


def test_resume_resumes_only_the_elements_reported_in_its_round():
    p = PeRounds()
    here = p.report([p.sync(NEVER)])[0]  # round 1, reported here
    p.landed((REPORTED, 2, 0))  # resumed elsewhere, synced for round 2 and landed before RESUME 1 came here
    out = p.resume(1, [("here", here), ("landed", (REPORTED, 2, 0)), ("free", NEVER)])
    assert out == [("here", (RESUMING, 1, 0))] and p.waiting == 1 and p.gen == 2
    assert resumed((RESUMING, 1, 0)) == (FREE, 1, 0) and resumed((REPORTED, 2, 0)) is None
    assert p.sync((FREE, 0, 0)) == (SYNCED, 2, 0)  # inserted late: it joins the next round


def test_an_element_that_lands_keeps_its_queued_resumes():
    p = PeRounds()
    assert p.landed((RESUMING, 3, 2)) == (True, 2)
    assert skipped((FREE, 3, 0)) == (FREE, 3, 1) and quick_resumed((FREE, 3, 1)) == (FREE, 3, 0)
    assert quick_resumed((FREE, 3, 0)) is None


def test_a_plan_departs_expects_and_says_moved_once_everything_is_in():
    p = PeRounds()
    moves = [("a", 0, 1), ("b", 1, 0), ("c", 2, 1), ("d", 1, 2)]
    acts = p.saw_plan(1, moves, 1, {"b", "d", "x"})
    assert acts == [(EXPECT, "a"), (DEPART, "b", 0, 1), (EXPECT, "c"), (DEPART, "d", 2, 1)]
    assert p.arrived("c") == [] and p.arrived("a") == [(SEND_MOVED,)] and p.awaiting is None
    assert PeRounds().saw_plan(1, [("a", 0, 2)], 1, set()) == []  # nothing here, nothing for here: no MOVED


def test_an_element_that_comes_before_its_plan_lands_after_it():
    p = PeRounds()
    p.saw_plan(1, [], 1, set())
    assert not p.came_early(1, "old") and p.came_early(2, "a") and p.came_early(3, "z")
    acts = p.saw_plan(2, [("a", 0, 1)], 1, set())
    assert acts == [(EXPECT, "a"), (LAND, "a")] and p.early == [(3, "z")]
    assert p.arrived("a") == [(SEND_MOVED,)]


def test_plan_numbers_wrap_in_16_bits_and_stay_in_order():
    assert plan16(1) == 1 and plan16(0xFFFF) == 0xFFFF and plan16(0x10000) == 1 and plan16(0) == 0
    p = PeRounds()
    p.saw_plan(0xFFFF, [], 1, set())
    assert p.came_early(plan16(0x10000), "next") and not p.came_early(0xFFFE, "earlier")


def test_which_at_sync_calls_balance():
    assert [n for n in range(1, 10) if balances(n, 3, 1)] == [3, 6, 9]
    assert [n for n in range(1, 5) if balances(n, 0, 1)] == [1, 2, 3, 4]
    assert [n for n in range(1, 8) if balances(n, AUTO, 5)] == [5, 6, 7]


def test_the_state_machines_load_no_transport_runtime_or_numpy():
    code = ("import sys; import shoal._runtime.round_coordinator, shoal._runtime.round_pe; "
            "print(sorted(m for m in sys.modules if m == 'numpy' or m.startswith(('shoal._transport', "
            "'shoal._runtime.runtime', 'shoal._runtime.message', 'shoal._runtime.engine', 'mpi4py'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr
