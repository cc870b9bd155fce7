"""The scheduler's queue on the timeline: a ``PE n queued`` counter per PE, bounded in
size, that the report reads past."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest
from support.commands import clean_env

from shoal._runtime.trace_bins import MAX_COUNTERS
from shoal._runtime.trace_queue import queue_events
from shoal._runtime.tracing import Tracer


def _counter(rec: dict) -> list[tuple[float, int]]:
    return [(ev["ts"], ev["args"]["queued"]) for ev in map(json.loads, queue_events(rec, 0.0))]


def test_each_stretch_shows_its_longest_queue_then_what_it_ended_with():
    t = Tracer(0, lambda: 0.0)
    t._queue[:] = [(0.5, 7), (0.5000001, 0), (0.75, 2)]  # a burst of 7 drained at once, later 2
    rec = {**t.export(), "end": 1.0}
    width = 1.0 / MAX_COUNTERS
    got = _counter(rec)
    assert [q for _, q in got] == [7, 0, 2]
    assert got[0][0] == pytest.approx(0.5e6, abs=width * 1e6) and got[1][0] == pytest.approx(got[0][0] + width * 1e6)


def test_the_counter_is_bounded_however_many_notes():
    t = Tracer(0, lambda: 0.0)
    t._queue[:] = [(k / 1e5, k % 3) for k in range(100_000)]
    assert len(_counter({**t.export(), "end": 1.0})) <= 2 * MAX_COUNTERS
    assert _counter({**Tracer(1, lambda: 0.0).export(), "end": 1.0}) == []  # nothing noted, no track


PROGRAM = textwrap.dedent('''
    import time

    import shoal


    class W(shoal.Chare):
        def __init__(self):
            self.got = 0

        def burst(self, other):
            for k in range(300):
                other.take(k)

        def take(self, k):
            self.got += 1


    def main(args):
        arr = shoal.Array(W, 4)  # elements 0 and 1 on PE 0 (blocks): the burst waits in its queue
        arr[0].burst(arr[1])
        shoal.quiescence().get()
        time.sleep(0.01)  # the run goes on past the burst's bins (1 ms each): its last bin is after the drain
        shoal.exit()


    shoal.start(main)
''')


@pytest.mark.parametrize("transport", [pytest.param("mpi", marks=pytest.mark.mpi), "inproc"])
def test_a_burst_of_local_messages_shows_in_the_queue(tmp_path, transport):
    prog, out = tmp_path / "burst.py", tmp_path / "q.json"
    prog.write_text(PROGRAM)
    cmd = [sys.executable, "-m", "shoal", "run", "-n", "2", "--transport", transport, "--trace", str(out), str(prog)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=clean_env(), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    events = json.loads(out.read_text())["traceEvents"]
    queued = [ev["args"]["queued"] for ev in events if ev.get("name") == "PE 0 queued"]
    peak = queued.index(max(queued))
    assert max(queued) >= 100 and 0 in queued[peak:], queued  # most of the 300 waited at once, then drained
    from shoal.trace.report import write_report

    an = write_report(out, tmp_path / "q.html")  # the counters are read past
    assert "W.take" in an.methods


# -- summary mode: the longest queue per bin -------------------------------------------------------
class _Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def _noting(t, clock, when: float, waiting: int) -> None:
    clock.t = when
    t._queued_last != waiting and t.queued(waiting)


def test_summary_bins_keep_each_bins_longest_queue_and_the_length_it_held():
    from shoal._runtime.trace_bins import SummaryTracer

    clock = _Clock()
    t = SummaryTracer(0, 0.1, clock)
    _noting(t, clock, 0.05, 7)  # bin 0: 7, held through bins 1 and 2 ...
    _noting(t, clock, 0.25, 3)  # ... until bin 2, where it drops to 3
    _noting(t, clock, 0.42, 0)  # bin 4: drained
    _noting(t, clock, 0.61, 2)  # bin 6: 2, held to the end
    clock.t = 0.85
    rec = t.export()
    assert rec["bins"]["queue"] == [7, 7, 7, 3, 3, 0, 2, 2, 2]
    assert rec["queue"] == []  # no note kept: bounded
    got = _counter(rec)
    assert [q for _, q in got] == [7, 3, 0, 2]
    assert got[1][0] == pytest.approx(0.3e6)


def test_summary_queue_bins_merge_to_the_longer_and_stay_bounded():
    from shoal._runtime.trace_bins import SummaryTracer

    clock = _Clock()
    t = SummaryTracer(0, 0.001, clock, cap=64)
    for k in range(10_000):  # 10 s of bins of 1 ms: the width doubles until 64 bins hold it
        _noting(t, clock, k * 0.001, 50 if k == 5_000 else k % 2)
    clock.t = 10.0
    queue = t.export()["bins"]["queue"]
    assert len(queue) <= 64 and max(queue) == 50 and queue.count(50) == 1 and min(queue) == 1
    assert len(_counter(t.export())) <= MAX_COUNTERS


@pytest.mark.parametrize("transport", [pytest.param("mpi", marks=pytest.mark.mpi), "inproc"])
def test_a_burst_shows_in_the_queue_in_summary_mode(tmp_path, transport):
    prog, out = tmp_path / "burst.py", tmp_path / "q.json"
    prog.write_text(PROGRAM)
    cmd = [sys.executable, "-m", "shoal", "run", "-n", "2", "--transport", transport, "--trace", str(out),
           "--trace-summary", "1ms", str(prog)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=clean_env(), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(out.read_text())
    pe0 = data["otherData"]["shoal"]["summary"]["pes"][0]
    # the burst waited (most of the 300 at once), then drained: the last bin's longest is short
    assert max(pe0["queue"]) >= 100 and pe0["queue"][-1] <= 3, pe0["queue"]
    queued = [ev["args"]["queued"] for ev in data["traceEvents"] if ev.get("name") == "PE 0 queued"]
    assert max(queued) == max(pe0["queue"]) and queued[-1] == pe0["queue"][-1]
