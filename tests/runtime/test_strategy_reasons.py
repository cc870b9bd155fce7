"""What each balancing strategy decided and why (strategy_reasons.Reason), without processes."""

from __future__ import annotations

import numpy as np
import pytest

from shoal._runtime import strategies as S
from shoal._runtime import strategy_reasons as R
from shoal._runtime.strategies import CommGraph

TWO = np.r_[np.zeros(16, np.int64), np.ones(16, np.int64)]


def _auto(loads, placement=TWO, pes=2, **kw):
    new, reason = S.auto_reasoned(loads, CommGraph.empty(), placement, pes, np.ones(pes), **kw)
    np.testing.assert_array_equal(new, S.auto(loads, CommGraph.empty(), placement, pes, np.ones(pes), **kw))
    return new, reason


def test_auto_under_the_threshold_moves_nothing_and_says_so():
    new, r = _auto(np.r_[np.full(16, 1.04), np.full(16, 1.0)])  # PE 0 is 2% above the average
    assert (r.plan, r.why, r.moves) == (R.NOTHING, R.UNDER, 0)
    assert r.imbalance == pytest.approx(1.04 / 1.02) and r.threshold == pytest.approx(1 + S.TOLERANCE)
    assert r.after == r.imbalance and r.saved is None and r.cost is None


def test_auto_says_refine_was_enough():
    rng = np.random.default_rng(5)
    loads = rng.uniform(0.9, 1.1, 320)
    placement = np.arange(320) % 32
    loads[placement == 0] *= 1.5  # one hot PE of 32
    new, r = _auto(loads, placement, 32)
    assert (r.plan, r.why) == ("refine", R.ENOUGH)
    assert r.moves == (new != placement).sum() > 0
    assert r.imbalance > 1.4 and r.after <= r.threshold and r.saved > r.cost > 0


def test_auto_says_greedy_was_needed_or_a_big_move_did_not_pay():
    loads = np.r_[np.full(16, 3e-3), np.full(16, 1e-3)]  # 3:1, every element heavy
    _, cheap = _auto(loads, sizes=np.full(32, 1e3))
    assert cheap.plan in ("refine", "greedy") and cheap.after < cheap.imbalance
    _, costly = _auto(loads, sizes=np.full(32, 1e9))  # 1 GB each: no move pays in one period
    assert (costly.plan, costly.why, costly.moves) == (R.NOTHING, R.UNPAID, 0)
    assert costly.weighed in ("refine", "greedy") and costly.cost > costly.saved > 0


def test_auto_chooses_greedy_where_refine_cannot_even_the_load():
    loads, placement = np.array([6.0, 2.0, 5.0, 9.0]), np.array([2, 0, 0, 0])  # refine moves none of 5 and 9 well
    new, r = _auto(loads, placement, 3, sizes=np.ones(4))
    assert (r.plan, r.why, r.weighed) == ("greedy", R.NEEDED, "")
    assert r.moves == (new != placement).sum() == 1 and r.after < r.imbalance and r.saved > r.cost


def test_auto_says_when_refine_saved_more_or_nothing_could():
    loads, placement = np.array([3.0, 4.0, 9.0, 5.0]), np.array([2, 0, 2, 2])
    _, r = _auto(loads, placement, 3, sizes=np.ones(4))
    assert (r.plan, r.why) == ("refine", R.BETTER) and r.threshold < r.after < r.imbalance
    _, stuck = _auto(np.array([4.0, 7.0, 2.0, 7.0]), np.array([0, 0, 1, 1]), 2)  # no move lowers the maximum
    assert (stuck.plan, stuck.why, stuck.moves) == (R.NOTHING, R.NO_GAIN, 0)


def test_judge_measures_any_strategys_placement():
    loads = np.r_[np.full(16, 1.04), np.full(16, 1.0)]
    new = S.greedy(loads, CommGraph.empty(), TWO, 2, np.ones(2))
    r = R.judge("greedy", loads, TWO, new, np.ones(2), S.TOLERANCE)
    assert (r.strategy, r.plan, r.why) == ("greedy", "greedy", R.PLACED)
    assert r.moves == (new != TWO).sum() > 0 and r.imbalance <= r.threshold and r.after <= r.imbalance
    still = R.judge("refine", loads, TWO, TWO, np.ones(2), S.TOLERANCE)
    assert (still.plan, still.moves) == (R.NOTHING, 0)


def test_a_reason_as_trace_args_is_json_numbers():
    import json

    _, r = _auto(np.r_[np.full(16, 3e-3), np.full(16, 1e-3)], sizes=np.full(32, 1e9))
    args = r.as_args()
    assert set(args) == {"plan", "why", "imbalance", "threshold", "moves", "after", "saved", "cost", "weighed"}
    assert json.loads(json.dumps(args)) == args
    _, quiet = _auto(np.ones(32))
    assert "saved" not in quiet.as_args() and quiet.as_args()["imbalance"] == 1.0


def test_slower_pes_count_in_the_imbalance():
    loads, placement = np.ones(4), np.array([0, 0, 1, 1])
    assert R.imbalance(loads, placement, np.array([1.0, 1.0])) == 1.0
    # PE 1 at half speed takes 4 s; spread by speed the 4 s of load take 8/3 s each
    assert R.imbalance(loads, placement, np.array([1.0, 0.5])) == pytest.approx(4 / (8 / 3))
