"""Balancing rounds as their coordinator records them (tests/programs/balancing_rounds.py):
the first round loads nothing the later ones do not (issue 37), and ``--lb-period auto``
balances as often as the load's drift makes it pay; the period policy
(shoal/_runtime/lb_period.py) and the strategies' ``unique`` as pure functions."""

from __future__ import annotations

import ast
import subprocess
import sys

import numpy as np
import pytest
from support import PROGRAMS
from support.commands import clean_env
from support.jobs import Job, named_results

from shoal._runtime.lb_period import AUTO, LONGEST, Interval, interval, next_floor, next_period
from shoal._runtime.setops import unique
from shoal.settings import SettingsError, load_settings

PROGRAM = PROGRAMS / "balancing_rounds.py"
SETUPS = [
    pytest.param(("mpi", 2), marks=pytest.mark.mpi, id="mpi2"),
    pytest.param(("inproc", 2), id="inproc2"),
]


def run_case(setup: tuple[str, int], case: str, steps: int, *options: str) -> dict[str, str]:
    transport, n = setup
    env = clean_env()
    env["SHOAL_DEADLOCK_TIMEOUT"] = "5"
    cmd = [sys.executable, "-m", "shoal", "run", "-n", str(n), "--transport", transport, *options, str(PROGRAM), case,
           str(steps)]
    job = Job(subprocess.run(cmd, capture_output=True, text=True, timeout=180, env=env, cwd=PROGRAM.parent))
    assert job.returncode == 0, job.stderr
    return named_results(job.stdout)


# -- the first round ---------------------------------------------------------------------------
@pytest.mark.parametrize("setup", SETUPS)
@pytest.mark.parametrize("lb", ["greedy", "auto", "refine", "comm"])
def test_no_round_imports_anything_the_first_one_included(setup, lb):
    """A job that balances loads NumPy and its strategy when it starts: no round, the first
    one included, imports a module while the PEs report and the coordinator decides
    (NumPy's import made the first round start 40-75 ms after the last at_sync)."""
    got = run_case(setup, "stable", 6, "--lb", lb)
    imported = ast.literal_eval(got["imported"])
    assert len(imported) == 6 and imported == [0] * 6, got
    assert got["numpy_at_start"] == "True"  # the program imports none itself: the balancer did
    loaded = ast.literal_eval(got["strategies_at_start"])  # the strategies' modules, by their last name
    assert {"strategy_registry", "strategies"} <= set(loaded) and ("comm_strategy" in loaded) == (lb == "comm"), got
    assert got["phases"] == "True"


def test_a_job_that_does_not_balance_does_not_load_numpy():
    """Start-up of jobs without --lb stays as it was: no NumPy, no strategies."""
    got = run_case(("inproc", 2), "stable", 3)
    assert got["numpy_at_start"] == "False" and got["rounds"] == "0", got
    assert got["strategies_at_start"] == "[]", got  # not even the registry: nothing looks a strategy up


# -- the period ------------------------------------------------------------------------------------
@pytest.mark.mpi
def test_auto_period_balances_a_drifting_load_more_often_than_a_stable_one():
    """Under MPI, where imbalance costs time (in-process PEs take turns in one thread).
    The drifting band crosses every element in 16 steps, so over a long period every
    element's total looks alike: the PEs' idle time shows the drift. Other processes on
    the cores look like drift too (their preemption is idle time), so on a busy machine
    one pair of runs may not tell the two apart: the best of three pairs must."""
    setup, seen = ("mpi", 2), []
    for _ in range(3):
        stable = run_case(setup, "stable", 80, "--lb", "greedy", "--lb-period", "auto")
        drift = run_case(setup, "drift", 80, "--lb", "greedy", "--lb-period", "auto")
        n_stable, n_drift = int(stable["rounds"]), int(drift["rounds"])
        seen.append((n_stable, n_drift, stable["periods"]))
        if n_drift >= 1.5 * n_stable and max(ast.literal_eval(stable["periods"])) >= 8:
            break  # a stable load lengthened the period; a drifting one kept it short
    else:
        pytest.fail(f"(stable rounds, drifting rounds, stable periods) in three pairs of runs: {seen}")


@pytest.mark.parametrize("setup", SETUPS)
def test_a_fixed_period_balances_at_every_nth_at_sync(setup):
    got = run_case(setup, "drift", 12, "--lb", "greedy", "--lb-period", "4")
    assert got["rounds"] == "3" and ast.literal_eval(got["periods"]) == [0, 0, 0], got


def test_lb_period_auto_is_a_setting():
    assert load_settings(environ={"SHOAL_LB_PERIOD": "auto"}).lb_period == AUTO
    assert load_settings(environ={}, lb_period="auto").lb_period == AUTO
    assert load_settings(environ={"SHOAL_LB_PERIOD": "7"}).lb_period == 7
    with pytest.raises(SettingsError, match="SHOAL_LB_PERIOD='-2' is not valid"):
        load_settings(environ={"SHOAL_LB_PERIOD": "-2"})
    with pytest.raises(SettingsError, match="SHOAL_LB_PERIOD='often' is not a valid int"):
        load_settings(environ={"SHOAL_LB_PERIOD": "often"})


def test_a_stable_load_doubles_the_period_up_to_the_longest():
    assert next_period(Interval(4, lost=0.0, mean=1.0, residual=0.0), cost=0.01) == 8
    assert next_period(Interval(4, lost=0.04, mean=1.0, residual=0.0), cost=0.01) == 8  # within 5%: stable
    assert next_period(Interval(LONGEST, lost=0.0, mean=1.0, residual=0.0), cost=0.01) == LONGEST
    # the loss the placement left from the start is no drift
    assert next_period(Interval(10, lost=0.5, mean=1.0, residual=0.05), cost=0.01) == 20


def test_a_drifting_load_shortens_the_period_to_the_optimum():
    # loss 0.5 s over 10 intervals from nothing: drift g = 2 * 0.5 / 100 = 0.01 s per interval
    measured = Interval(10, lost=0.5, mean=1.0, residual=0.0)
    assert measured.drift() == pytest.approx(0.01)
    assert next_period(measured, cost=0.02) == 2  # sqrt(2 * 0.02 / 0.01)
    assert next_period(measured, cost=0.5) == 10  # sqrt(100)
    assert next_period(measured, cost=50.0) == 20  # never more than twice the last period at once
    assert next_period(measured, cost=0.0) == 1  # a free round: every at_sync
    assert next_period(Interval(10, lost=0.5, mean=1.0, residual=0.02), cost=0.02) == 3  # g = 0.006


def test_idle_time_beyond_the_floor_is_drift_that_loads_hide():
    # the loads look even (a hot spot crossed every PE), but the PEs waited 0.5 s more than the floor
    hidden = Interval(10, lost=0.0, mean=1.0, residual=0.0, idle=0.6, floor=0.01)
    assert hidden.drift() == pytest.approx(0.01) and next_period(hidden, cost=0.02) == 2
    # waiting as much per at_sync as ever (communication, not imbalance): stable
    assert next_period(Interval(10, lost=0.0, mean=1.0, residual=0.0, idle=0.3, floor=0.03), cost=0.02) == 20
    assert next_period(Interval(10, lost=0.0, mean=1.0, residual=0.0, idle=0.34, floor=0.03), cost=0.02) == 20
    # the floor: the first interval's idle time per at_sync, then a running mean
    first = Interval(4, lost=0.0, mean=1.0, residual=0.0, idle=0.04)
    assert first.floor == pytest.approx(0.01) and first.drift() == 0.0
    got = interval(np.array([1.0, 1.0]), np.array([0, 1]), np.ones(2), 4, 0.0, np.array([0.02, 0.06]), 0.05)
    assert (got.idle, got.floor) == (pytest.approx(0.04), 0.05)
    assert next_floor(got) == pytest.approx(0.01)  # less idle time per at_sync: the floor falls to it
    assert next_floor(Interval(2, 0.0, 1.0, 0.0, idle=0.2, floor=0.02)) == pytest.approx(0.02 + 0.25 * 0.08)


def test_the_period_follows_the_cost_of_a_round():
    measured = Interval(16, lost=2.0, mean=10.0, residual=0.0)
    periods = [next_period(measured, cost=c) for c in (0.001, 0.01, 0.1, 1.0)]
    assert periods == sorted(periods) and periods[0] < periods[-1], periods
    with pytest.raises(ValueError, match="cost must be a finite number"):
        next_period(measured, cost=float("nan"))


def test_interval_measures_the_slowest_pe_against_the_mean():
    got = interval(np.array([3.0, 1.0, 1.0, 1.0]), np.array([0, 0, 1, 1]), np.ones(2), 2, 0.1)
    assert (got.period, got.lost, got.mean, got.residual) == (2, 1.0, 3.0, 0.1)
    slow = interval(np.array([1.0, 1.0]), np.array([0, 1]), np.array([1.0, 0.5]), 1, 0.0)
    assert (slow.lost, slow.mean) == (0.5, 1.5)  # PE 1 at half speed takes 2 s


# -- unique without numpy.ma -----------------------------------------------------------------------
@pytest.mark.parametrize("seed", range(5))
def test_unique_agrees_with_numpy(seed):
    rng = np.random.default_rng(seed)
    for a in (rng.integers(0, 7, size=50), rng.random(20).round(1), np.array([], dtype=np.int64), np.array([4])):
        keys, inv, counts = np.unique(a, return_inverse=True, return_counts=True)
        assert np.array_equal(unique(a), keys)
        got_keys, got_inv = unique(a, return_inverse=True)
        assert np.array_equal(got_keys, keys) and np.array_equal(got_inv, inv.ravel())
        assert np.array_equal(unique(a, return_counts=True)[1], counts)
        assert np.array_equal(unique(a, return_inverse=True, return_counts=True)[2], counts)


def test_the_strategies_do_not_import_numpy_ma():
    code = ("import sys, numpy as np\n"
            "from shoal._runtime.strategies import CommGraph\n"
            "from shoal._runtime.strategy_registry import BUILTIN, get_strategy\n"
            "loads = np.array([3.0, 1, 1, 1, 2, 2]); placement = np.array([0, 0, 0, 1, 1, 1])\n"
            "comm = CommGraph(np.array([0, 1]), np.array([1, 2]), np.array([1, 1]), np.array([8, 8]))\n"
            "for name in BUILTIN:\n"
            "    get_strategy(name)(loads, comm, placement, 2, np.array([1.0, 0.5]))\n"
            "print('numpy.ma' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=clean_env(), timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"
