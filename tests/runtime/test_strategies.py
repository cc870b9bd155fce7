"""Load-balancing strategies: pure functions, tested on synthetic loads with no processes."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shoal._runtime import strategies as S
from shoal._runtime import strategy_registry as R
from shoal._runtime.comm_strategy import comm
from shoal._runtime.strategies import CommGraph, background_speeds, check_placement
from shoal._runtime.strategy_registry import BUILTIN, get_strategy, register_strategy
from shoal.errors import ShoalError

BALANCING = ["greedy", "refine", "comm"]
FAST = settings(max_examples=40, deadline=None)


def grid(rows: int, cols: int, nbytes: int = 8000) -> CommGraph:
    """A 2-D 5-point stencil: each element talks to its right and lower neighbour."""
    idx = np.arange(rows * cols).reshape(rows, cols)
    src = np.concatenate([idx[:, :-1].ravel(), idx[:-1, :].ravel()])
    dst = np.concatenate([idx[:, 1:].ravel(), idx[1:, :].ravel()])
    return CommGraph(src, dst, np.ones(src.size, np.int64), np.full(src.size, nbytes, np.int64))


def ring(n: int, nbytes: int = 8000) -> CommGraph:
    src = np.arange(n)
    return CommGraph(src, (src + 1) % n, np.ones(n, np.int64), np.full(n, nbytes, np.int64))


def cut(graph: CommGraph, part: np.ndarray) -> int:
    return int(graph.nbytes[part[graph.src] != part[graph.dst]].sum())


def times(loads: np.ndarray, part: np.ndarray, speeds: np.ndarray) -> np.ndarray:
    return np.bincount(part, weights=loads, minlength=speeds.size) / speeds


@st.composite
def problems(draw: st.DrawFn, speeds_vary: bool = False) -> tuple:
    """Random loads (some heavy-tailed), placement, speeds and communication graph."""
    n = draw(st.integers(0, 150))
    pes = draw(st.integers(1, 12))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    kind = draw(st.sampled_from(["uniform", "lognormal", "zeros", "one-heavy"]))
    loads = {"uniform": rng.uniform(0, 1, n), "lognormal": rng.lognormal(0, 1.5, n), "zeros": np.zeros(n), "one-heavy": np.r_[np.full(min(n, 1), 50.0), rng.uniform(0, 1, max(n - 1, 0))]}[kind]
    placement = rng.integers(0, pes, n) if draw(st.booleans()) else np.zeros(n, np.int64)
    speeds = rng.uniform(0.2, 1.0, pes) if speeds_vary else np.ones(pes)
    m = draw(st.integers(0, 3 * n)) if n else 0
    graph = CommGraph(rng.integers(0, max(n, 1), m), rng.integers(0, max(n, 1), m), rng.integers(0, 5, m), rng.integers(0, 10_000, m))
    return loads, graph, placement, pes, speeds


# --- every strategy: a valid, fresh, deterministic placement ---------------------------


@FAST
@given(problems(speeds_vary=True), st.sampled_from(sorted(BUILTIN)))
def test_every_element_placed_once_in_range(problem, name):
    loads, graph, placement, pes, speeds = problem
    before = [a.copy() for a in (loads, placement, speeds)]
    new = get_strategy(name)(loads, graph, placement, pes, speeds, seed=3)
    assert new.dtype == np.int64 and new.shape == loads.shape
    assert new is not placement and not np.shares_memory(new, placement)
    assert ((new >= 0) & (new < pes)).all()
    check_placement(new, loads.size, pes, name)
    for a, b in zip(before, (loads, placement, speeds)):
        np.testing.assert_array_equal(a, b)  # inputs untouched
    again = get_strategy(name)(loads.copy(), graph, placement.copy(), pes, speeds.copy(), seed=3)
    np.testing.assert_array_equal(new, again)


@FAST
@given(problems(speeds_vary=True), st.sampled_from(BALANCING))
def test_balancing_reaches_bound_of_optimum(problem, name):
    """Max time is within one heaviest element (on the slowest PE) of the lower bound."""
    loads, graph, placement, pes, speeds = problem
    new = get_strategy(name)(loads, graph, placement, pes, speeds)
    avg = loads.sum() / speeds.sum()
    heaviest = loads.max(initial=0.0) / speeds.min()
    slack = 0.0 if name == "greedy" else S.TOLERANCE * avg
    assert times(loads, new, speeds).max() <= avg + slack + heaviest + 1e-9
    if name != "greedy":  # refine and comm never make the worst PE worse
        assert times(loads, new, speeds).max() <= max(times(loads, placement, speeds).max(), (1 + S.TOLERANCE) * avg) + 1e-9


@pytest.mark.parametrize("name", BALANCING)
@pytest.mark.parametrize("start", ["all-on-0", "patch"])
def test_balancing_fixes_a_bad_placement(name, start):
    rng = np.random.default_rng(7)
    n, pes = 2000, 16
    loads = rng.lognormal(0, 0.5, n)
    # patch: the heaviest quarter of the elements crowded onto PEs 0 and 1
    bad = np.zeros(n, np.int64) if start == "all-on-0" else np.where(loads > np.quantile(loads, 0.75), np.arange(n) % 2, np.arange(n) % pes)
    speeds = np.ones(pes)
    new = get_strategy(name)(loads, grid(40, 50), bad, pes, speeds)
    spread = times(loads, new, speeds).max() / (loads.sum() / pes)
    assert spread < times(loads, bad, speeds).max() / (loads.sum() / pes)
    assert spread <= 1 + S.TOLERANCE + 1e-9
    if name == "greedy":
        assert spread < 1.01


def test_seeds():
    rng = np.random.default_rng(0)
    args = (rng.uniform(size=500), CommGraph.empty(), np.zeros(500, np.int64), 10, np.ones(10))
    same = [S.random(*args, seed=5), S.random(*args, seed=5)]
    np.testing.assert_array_equal(*same)
    assert not np.array_equal(S.random(*args, seed=5), S.random(*args, seed=6))
    for name in BALANCING:  # the built-in balancers do not draw random numbers at all
        np.testing.assert_array_equal(get_strategy(name)(*args, seed=1), get_strategy(name)(*args, seed=2))


def test_greedy_breaks_ties_by_element_and_pe():
    new = S.greedy(np.ones(6), CommGraph.empty(), np.zeros(6, np.int64), 3, np.ones(3))
    assert new.tolist() == [0, 1, 2, 0, 1, 2]


def test_empty_and_single_pe():
    for name in BUILTIN:
        fn = get_strategy(name)
        assert fn(np.zeros(0), CommGraph.empty(), np.zeros(0, np.int64), 4, np.ones(4)).shape == (0,)
        assert fn(np.ones(5), ring(5), np.zeros(5, np.int64), 1, np.ones(1)).tolist() == [0] * 5


# --- refine: few moves -------------------------------------------------------------------


def near_balanced(n: int = 4000, pes: int = 40) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(1)
    loads = rng.uniform(0.5, 1.5, n)
    placement = np.arange(n) % pes
    placement[rng.choice(n, 30, replace=False)] = 0  # PE 0 picks up ~30 extra elements
    return loads, placement


def test_refine_moves_few():
    loads, placement = near_balanced()
    speeds = np.ones(40)
    new = S.refine(loads, CommGraph.empty(), placement, 40, speeds)
    moved = int((new != placement).sum())
    assert times(loads, new, speeds).max() <= (1 + S.TOLERANCE) * loads.sum() / 40 + 1e-9
    assert 0 < moved <= 40
    assert moved * 20 < int((S.greedy(loads, CommGraph.empty(), placement, 40, speeds) != placement).sum())


def test_refine_leaves_a_balanced_placement_alone():
    loads = np.ones(100)
    placement = np.arange(100) % 10
    np.testing.assert_array_equal(S.refine(loads, CommGraph.empty(), placement, 10, np.ones(10)), placement)


def test_refine_stops_when_one_element_dominates():
    loads = np.r_[100.0, np.ones(9)]
    new = S.refine(loads, CommGraph.empty(), np.zeros(10, np.int64), 3, np.ones(3))
    assert (new[1:] != 0).all()  # everything else leaves the giant's PE
    assert times(loads, new, np.ones(3))[0] == 100.0


# --- pe_speeds ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", BALANCING)
def test_half_speed_pe_gets_half_the_load(name):
    rng = np.random.default_rng(2)
    n, pes = 1600, 4
    loads = rng.uniform(0.5, 1.5, n)
    speeds = np.array([1.0, 1.0, 1.0, 0.5])
    new = get_strategy(name)(loads, grid(40, 40), np.arange(n) % pes, pes, speeds)
    per_pe = np.bincount(new, weights=loads, minlength=pes)
    assert per_pe[3] / per_pe[:3].mean() == pytest.approx(0.5, abs=0.06)


# --- comm: fewer cut bytes ---------------------------------------------------------------


@pytest.mark.parametrize("shape", ["grid", "ring"])
@pytest.mark.parametrize("start", ["round-robin", "all-on-0"])
def test_comm_cuts_fewer_bytes_than_greedy(shape, start):
    n, pes = 32 * 32, 16
    graph = grid(32, 32) if shape == "grid" else ring(n)
    loads = np.ones(n)
    speeds = np.ones(pes)
    placement = np.arange(n) % pes if start == "round-robin" else np.zeros(n, np.int64)
    by_comm = comm(loads, graph, placement, pes, speeds)
    by_greedy = S.greedy(loads, graph, placement, pes, speeds)
    assert cut(graph, by_comm) * 3 < cut(graph, by_greedy)  # here greedy keeps columns (32 % 16 == 0)
    assert times(loads, by_comm, speeds).max() <= 1.10 * n / pes
    if shape == "ring":
        assert cut(graph, by_comm) <= 2 * pes * 8000  # contiguous arcs, at most a stray or two


def test_comm_with_uneven_loads_and_message_counts():
    rng = np.random.default_rng(3)
    graph = grid(30, 30)
    graph = graph._replace(messages=rng.integers(1, 20, graph.src.size))
    loads = rng.lognormal(0, 0.7, 900)
    speeds = np.ones(12)
    by_comm = comm(loads, graph, np.zeros(900, np.int64), 12, speeds)
    assert cut(graph, by_comm) * 3 < cut(graph, S.greedy(loads, graph, np.zeros(900, np.int64), 12, speeds))
    assert times(loads, by_comm, speeds).max() <= 1.15 * loads.sum() / 12


def test_comm_keeps_a_good_placement():
    """Run again on its own result, or with slightly changed loads, comm migrates little."""
    rng = np.random.default_rng(4)
    graph = grid(40, 40)
    loads = rng.uniform(0.8, 1.2, 1600)
    speeds = np.ones(16)
    first = comm(loads, graph, np.arange(1600) % 16, 16, speeds)
    assert int((comm(loads, graph, first, 16, speeds) != first).sum()) <= 16
    shaken = loads * rng.uniform(0.9, 1.1, 1600)
    assert int((comm(shaken, graph, first, 16, speeds) != first).sum()) <= 160


# --- rotate and random -------------------------------------------------------------------


def test_rotate_moves_every_element():
    placement = np.array([0, 1, 2, 3, 3, 0])
    new = S.rotate(np.ones(6), CommGraph.empty(), placement, 4, np.ones(4))
    assert new.tolist() == [1, 2, 3, 0, 0, 1]


def test_random_covers_the_pes():
    new = S.random(np.ones(1000), CommGraph.empty(), np.zeros(1000, np.int64), 8, np.ones(8), seed=0)
    assert set(new.tolist()) == set(range(8))


# --- registry ----------------------------------------------------------------------------


@pytest.fixture
def registry(monkeypatch):
    monkeypatch.setattr(R, "REGISTERED", {})
    return R.REGISTERED


def mine(loads, comm, placement, num_pes, pe_speeds, *, seed=0):
    return placement.copy()


def test_register_and_get(registry):
    assert set(BUILTIN) == {"auto", "greedy", "refine", "comm", "rotate", "random"} and not registry
    assert get_strategy("comm") is comm and get_strategy("greedy") is S.greedy  # a built-in: its module's function
    register_strategy("greedy", S.greedy)  # a built-in again under its own name is fine
    register_strategy("mine", mine)
    register_strategy("mine", mine)  # the same function again is fine
    assert get_strategy("mine") is mine
    with pytest.raises(ShoalError, match="already registered as 'mine'.*replace=True"):
        register_strategy("mine", lambda *a, seed=0: a[2])
    register_strategy("greedy", mine, replace=True)
    assert get_strategy("greedy") is mine


@pytest.mark.parametrize("name", ["", "two words", "1st", 3, None, "a/b"])
def test_register_rejects_bad_names(registry, name):
    with pytest.raises(ShoalError, match="strategy name must be"):
        register_strategy(name, mine)


def test_register_rejects_non_callables_and_wrong_signatures(registry):
    with pytest.raises(ShoalError, match="must be a function"):
        register_strategy("x", "greedy")
    with pytest.raises(ShoalError, match="must accept"):
        register_strategy("x", lambda loads, placement: placement)
    with pytest.raises(ShoalError, match="must accept"):
        register_strategy("x", lambda loads, comm, placement, num_pes, pe_speeds: placement)  # no seed
    assert "x" not in registry


def test_unknown_name_lists_known_ones(registry):
    with pytest.raises(ShoalError, match="unknown load-balancing strategy 'grready'.*comm, greedy, random, refine, rotate"):
        get_strategy("grready")


def test_registering_a_strategy_loads_no_numpy_and_no_built_in_one():
    """A program registers its strategy on every PE, with or without --lb: the names cost no
    NumPy; the built-ins load (NumPy with them) when a job asks for one."""
    probe = ("import sys, shoal\n"
             "shoal.register_strategy('mine', lambda loads, comm, placement, num_pes, pe_speeds, *, seed=0: placement)\n"
             "loaded = lambda: sorted(m for m in sys.modules if m == 'numpy' or m.endswith(('strategies', 'comm_strategy')))\n"
             "print(loaded())\n"
             "from shoal._runtime.strategy_registry import get_strategy\n"
             "get_strategy('mine'), get_strategy('comm')\n"
             "print(loaded())\n")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n")[:2] == [
        "[]", "['numpy', 'shoal._runtime.comm_strategy', 'shoal._runtime.strategies']"], out.stdout


# --- check_placement and inputs ----------------------------------------------------------


def test_check_placement_accepts_and_converts():
    out = check_placement([0, 2, 1], 3, 3, "mine")
    assert out.dtype == np.int64 and out.tolist() == [0, 2, 1]
    assert check_placement(np.array([1], np.uint8), 1, 2, "mine").dtype == np.int64


@pytest.mark.parametrize(
    "new, match",
    [
        (np.zeros(4, np.int64), r"returned shape \(4,\).*shape \(3,\)"),
        (np.zeros((3, 1), np.int64), r"returned shape \(3, 1\)"),
        (np.zeros(3), "returned dtype float64.*integer"),
        (np.array([True, False, True]), "returned dtype bool"),
        (np.array([0, 3, 1]), "placed element 1 on PE 3; PEs are 0..2"),
        (np.array([0, 1, -1]), "placed element 2 on PE -1"),
        (None, r"returned shape \(\)"),
    ],
)
def test_check_placement_errors_name_the_strategy(new, match):
    with pytest.raises(ShoalError, match="strategy 'mine'") as info:
        check_placement(new, 3, 3, "mine")
    assert info.match(match)


@pytest.mark.parametrize(
    "args, match",
    [
        ((np.ones(3), np.zeros(2, np.int64), 2, np.ones(2)), "one length"),
        ((np.ones(3), np.array([0, 2, 0]), 2, np.ones(2)), r"integer PEs in \[0, 2\)"),
        ((np.ones(3), np.zeros(3), 2, np.ones(2)), "dtype float64"),
        ((np.ones(3), np.zeros(3, np.int64), 2, np.ones(3)), "one entry per PE"),
        ((np.ones(3), np.zeros(3, np.int64), 0, np.ones(0)), "num_pes must be a positive integer"),
        ((np.array([1.0, -1, 1]), np.zeros(3, np.int64), 2, np.ones(2)), "non-negative"),
        ((np.ones(3), np.zeros(3, np.int64), 2, np.array([1.0, 0.0])), "positive"),
    ],
)
def test_bad_inputs(args, match):
    for name in BUILTIN:
        with pytest.raises(ShoalError, match=match):
            get_strategy(name)(args[0], CommGraph.empty(), *args[1:])


def test_comm_graph_outside_the_elements():
    graph = CommGraph(np.array([0]), np.array([5]), np.array([1]), np.array([10]))
    with pytest.raises(ShoalError, match="outside 0..2"):
        comm(np.ones(3), graph, np.zeros(3, np.int64), 2, np.ones(2))


# --- background_speeds -------------------------------------------------------------------


def test_background_speeds():
    wall = np.array([10.0, 10.0, 10.0, 10.0, 10.0, 0.0])
    busy = np.array([10.0, 5.0, 2.5, 0.0, 0.1, 0.0])
    idle = np.array([0.0, 0.0, 5.0, 10.0, 0.0, 0.0])
    # full core; half shared; half shared while working though half idle; never busy;
    # almost all background (floored); no time measured
    np.testing.assert_allclose(background_speeds(wall, busy, idle), [1.0, 0.5, 0.5, 1.0, 0.05, 1.0])
    assert background_speeds(10.0, 12.0, 0.0).tolist() == 1.0  # clock skew: never above 1
    np.testing.assert_allclose(background_speeds([4.0, 4.0], [1.0, 2.0], 0.0, floor=0.3), [0.3, 0.5])
    with pytest.raises(ShoalError, match="floor"):
        background_speeds(1.0, 1.0, 0.0, floor=0.0)


# --- auto: move only what pays ----------------------------------------------------------


@FAST
@given(problems(speeds_vary=True))
def test_auto_never_makes_the_worst_pe_worse_and_leaves_balance_alone(problem):
    loads, graph, placement, pes, speeds = problem
    new = S.auto(loads, graph, placement, pes, speeds)
    before, after = times(loads, placement, speeds).max(initial=0.0), times(loads, new, speeds).max(initial=0.0)
    assert after <= before + 1e-9
    if before <= (1 + S.TOLERANCE) * loads.sum() / speeds.sum():
        np.testing.assert_array_equal(new, placement)  # under 5% imbalance nothing moves


def test_auto_moves_nothing_under_five_percent():
    loads = np.r_[np.full(16, 1.04), np.full(16, 1.0)]  # PE 0 is 2% above the average
    placement = np.r_[np.zeros(16, np.int64), np.ones(16, np.int64)]
    assert (S.auto(loads, CommGraph.empty(), placement, 2, np.ones(2)) == placement).all()
    assert (S.greedy(loads, CommGraph.empty(), placement, 2, np.ones(2)) != placement).sum() > 0  # what greedy does


def test_auto_moves_at_most_a_tenth_when_a_few_moves_balance():
    rng = np.random.default_rng(5)
    loads = rng.uniform(0.9, 1.1, 320)
    placement = np.arange(320) % 32
    loads[placement == 0] *= 1.5  # one hot PE of 32
    new = S.auto(loads, CommGraph.empty(), placement, 32, np.ones(32))
    assert 0 < (new != placement).sum() <= 32
    assert times(loads, new, np.ones(32)).max() <= (1 + S.TOLERANCE) * loads.sum() / 32 + 1e-9


def test_auto_takes_a_large_move_only_if_it_pays_within_one_period():
    """3:1 imbalance across 2 PEs of 32 elements: refine cannot do it in few moves here
    (every element is heavy), so the choice is greedy's many moves, taken while the state
    is small and refused when moving it would cost more than a period saves."""
    loads = np.r_[np.full(16, 3e-3), np.full(16, 1e-3)]  # seconds per period
    placement = np.r_[np.zeros(16, np.int64), np.ones(16, np.int64)]
    cheap = S.auto(loads, CommGraph.empty(), placement, 2, np.ones(2), sizes=np.full(32, 1e3))
    assert times(loads, cheap, np.ones(2)).max() < times(loads, placement, np.ones(2)).max()
    costly = S.auto(loads, CommGraph.empty(), placement, 2, np.ones(2), sizes=np.full(32, 1e9))  # 1 GB each
    moved = (costly != placement).sum()
    assert moved <= S.MOVE_SHARE * 32  # only a move of a tenth or less, which need not pay at once
    with pytest.raises(ShoalError, match="sizes must give each element's bytes"):
        S.auto(loads, CommGraph.empty(), placement, 2, np.ones(2), sizes=np.ones(3))


def test_auto_is_the_strategy_that_weighs_sizes():
    assert R.takes_sizes(S.auto) and not R.takes_sizes(S.greedy)
    assert get_strategy("auto") is S.auto
