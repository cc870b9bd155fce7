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
