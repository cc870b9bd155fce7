"""Migration and load balancing (tests/programs/migration.py), under mpiexec on 2 and 3
PEs and on the in-process transport: messages sent while elements move arrive once and
in per-sender order, state (NumPy arrays included) and channels move intact, balancing
rounds keep broadcasts, reductions and sections right, and bad input is a clear error."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from support.commands import clean_env
from support import EXAMPLES, PROGRAMS
from support.jobs import Job, named_results

PROGRAM = PROGRAMS / "migration.py"
SETUPS = [
    pytest.param(("mpi", 2), marks=pytest.mark.mpi, id="mpi2"),
    pytest.param(("mpi", 3), marks=pytest.mark.mpi, id="mpi3"),
    pytest.param(("inproc", 2), id="inproc2"),
    pytest.param(("inproc", 3), id="inproc3"),
]


def run_case(setup: tuple[str, int], case: str, **env_extra: str) -> Job:
    transport, n = setup
    env = clean_env()
    env["SHOAL_DEADLOCK_TIMEOUT"] = "2"
    env.update(env_extra)
    cmd = [sys.executable, "-m", "shoal", "run", "-n", str(n), "--transport", transport, str(PROGRAM), case]
    return Job(subprocess.run(cmd, capture_output=True, text=True, timeout=180, env=env, cwd=PROGRAM.parent))


def results(job: Job) -> dict[str, str]:
    return named_results(job.stdout)


@pytest.fixture(params=SETUPS)
def setup(request: pytest.FixtureRequest) -> tuple[str, int]:
    return request.param


def test_messages_to_a_moving_element_arrive_once_in_order(setup):
    """Every PE streams numbered calls (with arrays) and channel messages to one element
    while it is moved between PEs twelve times."""
    job = run_case(setup, "order")
    assert job.returncode == 0, job.stderr
    got = results(job)
    assert got["calls"] == "True True True True", job.stdout  # in order, data intact, state intact, it moved
    assert got["channels"] == "True", job.stdout


@pytest.mark.parametrize("lb", ["greedy", "auto"])
def test_balancing_rounds_keep_broadcasts_reductions_and_sections(setup, lb):
    job = run_case(setup, "atsync", SHOAL_LB=lb)
    assert job.returncode == 0, job.stderr
    got = results(job)
    assert got["state"] == "True True", job.stdout  # NumPy state moved intact; reductions after moves
    assert got["pings"] == "True True", job.stdout  # a broadcast during a round reached each element once
    assert got["resumed"] == "True", job.stdout  # resume_from_sync once per element per round
    assert got["spread"].startswith("True"), job.stdout  # the strategy split the heavy elements
    assert got["section"] == "True", job.stdout  # section reductions with members away from home


def test_elements_that_are_not_migratable_stay(setup):
    """migratable = False: balancing rounds (rotate: everything else moves) leave it."""
    job = run_case(setup, "pinned", SHOAL_LB="rotate")
    assert job.returncode == 0, job.stderr
    assert results(job)["pinned"] == "True True", job.stdout


def test_a_receive_set_moves_with_its_element(setup):
    """An element with channels and a ReceiveSet moves between rounds; every round lands
    both arrays in the posted buffers on the PE it is on then."""
    job = run_case(setup, "receive_set")
    assert job.returncode == 0, job.stderr
    assert results(job)["receive_set"] == "True True", job.stdout


def test_strategies_get_the_communication_graph(setup):
    """Sampled sends between elements (compiled and Python paths) reach the strategy as
    edges between the right elements."""
    job = run_case(setup, "comm", SHOAL_LB="seen_comm")
    assert job.returncode == 0, job.stderr
    got = results(job)
    assert got["graph"] == "True True True", job.stdout
    assert got["delivered"] == "True", job.stdout


def test_a_traced_balancing_run_writes_a_timeline(setup, tmp_path):
    trace = tmp_path / "out.json"
    job = run_case(setup, "atsync", SHOAL_LB="greedy", SHOAL_TRACE=str(trace))
    assert job.returncode == 0, job.stderr
    data = json.loads(trace.read_text())
    events = data["traceEvents"]
    names = {ev["args"]["name"] for ev in events if ev.get("name") == "thread_name"}
    assert names == {f"PE {pe}" for pe in range(setup[1])}
    cats = {ev.get("cat") for ev in events}
    assert {"entry", "migration", "lb"} <= cats, cats
    if setup[0] == "mpi":  # a process of its own: it waits for messages now and then
        assert "idle" in cats
    entries = {ev["name"] for ev in events if ev.get("cat") == "entry"}
    assert {"Work.step", "Work.sync", "Work.resume_from_sync"} <= entries
    rounds = [ev for ev in events if ev.get("cat") == "lb"]
    assert len(rounds) == 2 and all(ev["args"]["strategy"] == "greedy" for ev in rounds)
    summary = subprocess.run([sys.executable, "-m", "shoal", "trace", "summary", str(trace)],
                             capture_output=True, text=True, timeout=60)
    assert summary.returncode == 0 and "Work.step" in summary.stdout


def test_the_balance_example_balances():
    env = clean_env()
    example = EXAMPLES / "balance.py"
    for extra, want in (([], "balance: OK (no strategy"), (["--lb", "greedy"], "balance: OK (balanced")):
        cmd = [sys.executable, "-m", "shoal", "run", "-n", "2", "--transport", "inproc", *extra, str(example)]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env)
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.strip().splitlines()[-1].startswith(want), proc.stdout


def test_without_a_strategy_at_sync_resumes_at_once():
    job = run_case(("inproc", 2), "atsync")
    assert job.returncode == 0, job.stderr
    got = results(job)
    assert got["resumed"] == "True" and got["state"] == "True True", job.stdout
    assert got["spread"].startswith("False"), job.stdout  # nothing moved


@pytest.mark.parametrize(
    "case, env, message",
    [
        ("bad_group", {}, "at_sync() on <Idle element 0>: the elements of a Group stay on their PE"),
        ("bad_pe", {}, "PE 7 does not exist; this job has PEs 0..1"),
        ("unpicklable", {}, "element 0 of Stuck cannot move from PE 0 to PE 1: its state cannot be pickled"),
        ("unknown_lb", {"SHOAL_LB": "nosuch"}, "unknown load-balancing strategy 'nosuch'; known strategies:"),
        ("unknown_lb", {"SHOAL_LB": "broken"}, "it must return one PE per element"),
    ],
)
@pytest.mark.parametrize("transport", [pytest.param("mpi", marks=pytest.mark.mpi), "inproc"])
def test_bad_input_is_a_clear_error(case, env, message, transport):
    job = run_case((transport, 2), case, **env)
    assert job.returncode != 0 and "no error" not in job.stdout
    assert message in job.stderr, job.stderr
