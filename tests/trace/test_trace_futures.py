"""Futures on the timeline: each registered future's life as a Perfetto async slice,
whether Python or the compiled core made it, and nothing installed with tracing off."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest
from support.commands import clean_env

PROGRAM = textwrap.dedent('''
    import shoal
    from shoal._runtime.context import current


    class W(shoal.Chare):
        def val(self, x):
            return x * 2


    async def main(args):
        arr = shoal.Array(W, 4)
        total = 0
        for k in range(4):
            total += await arr[k].val(k, ret=True)  # ONE: compiled where the element is on the other PE
        total += sum(await arr.val(1, ret=True))  # BROADCAST
        f = shoal.Future()  # MINE
        f.send(5)
        total += await f
        rt = current()
        tracer = rt.tracer
        print("total", total, "open", None if tracer is None else len(tracer._open_futures),
              "class", type(rt.future_table).__name__)
        shoal.exit()


    shoal.start(main)
''')


def _line(tag: str) -> int:
    return next(i for i, text in enumerate(PROGRAM.splitlines(), start=1) if f"# {tag}" in text)


def _run(tmp_path, transport: str, trace: bool) -> tuple[str, list[dict]]:
    prog = tmp_path / "futures.py"
    prog.write_text(PROGRAM)
    out = tmp_path / "f.json"
    cmd = [sys.executable, "-m", "shoal", "run", "-n", "2", "--transport", transport,
           *(["--trace", str(out)] if trace else []), str(prog)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=clean_env(), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    events = json.loads(out.read_text())["traceEvents"] if trace else []
    return proc.stdout, events


@pytest.mark.parametrize("transport", [pytest.param("mpi", marks=pytest.mark.mpi), "inproc"])
def test_each_future_is_an_async_slice_from_made_to_resolved(tmp_path, transport):
    stdout, events = _run(tmp_path, transport, trace=True)
    assert "total 25 open 0 class TracedFutureTable" in stdout, stdout  # nothing left open, none dropped unused
    slices = [ev for ev in events if ev.get("cat") == "future"]
    begins = {ev["id"]: ev for ev in slices if ev["ph"] == "b"}
    ends = {ev["id"]: ev for ev in slices if ev["ph"] == "e"}
    assert begins.keys() == ends.keys() and all(ends[i]["ts"] >= begins[i]["ts"] for i in begins)
    assert all(ev["name"] == "future" and ev["pid"] == 1 and ev["tid"] == 1 for ev in slices)  # PE 0's
    origins = sorted(int(ev["args"]["origin"].split(":")[1].split()[0]) for ev in begins.values())
    assert origins == [_line("ONE")] * 4 + [_line("BROADCAST"), _line("MINE")], origins


def test_tracing_off_leaves_the_future_table_plain(tmp_path):
    stdout, _ = _run(tmp_path, "inproc", trace=False)
    assert "total 25 open None class FutureTable" in stdout, stdout


def test_summary_mode_counts_futures_made_resolved_and_the_longest_wait_per_bin():
    from shoal._runtime.trace_bins import SummaryTracer
    from shoal._runtime.trace_futures import future_events

    now = [0.0]
    t = SummaryTracer(0, 0.1, lambda: now[0])
    now[0] = 0.95
    t.future_done(0.05, 0.32)  # made in bin 0, resolved in bin 3 after 0.27 s
    t.future_done(0.31, 0.33)  # made and resolved in bin 3 (0.02 s)
    t._open_futures[9] = 0.51  # made in bin 5, not resolved by the end
    b = t.export()["bins"]
    assert b["made"][:6] == [1, 0, 0, 1, 0, 1] and b["resolved"][:6] == [0, 0, 0, 2, 0, 0]
    assert b["wait"][3] == pytest.approx(0.27) and t._futures == []
    counters = [json.loads(line) for line in future_events(t.export(), 0.0)]
    assert {ev["name"] for ev in counters} == {"PE 0 futures"} and all(ev["ph"] == "C" for ev in counters)
    assert sum(ev["args"]["made"] for ev in counters) == 3
    assert max(ev["args"]["longest wait ms"] for ev in counters) == pytest.approx(270)


@pytest.mark.parametrize("transport", [pytest.param("mpi", marks=pytest.mark.mpi), "inproc"])
def test_summary_mode_counts_every_future(tmp_path, transport):
    prog = tmp_path / "futures.py"
    prog.write_text(PROGRAM)
    out = tmp_path / "f.json"
    cmd = [sys.executable, "-m", "shoal", "run", "-n", "2", "--transport", transport, "--trace", str(out),
           "--trace-summary", "1ms", str(prog)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=clean_env(), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "total 25 open 0 class TracedFutureTable" in proc.stdout, proc.stdout
    data = json.loads(out.read_text())
    assert not [ev for ev in data["traceEvents"] if ev.get("cat") == "future"]  # no slice per future: bounded
    futures = data["otherData"]["shoal"]["summary"]["pes"][0]["futures"]
    assert sum(futures["made"]) == 6 and sum(futures["resolved"]) == 6 and max(futures["wait"]) > 0
    assert [ev for ev in data["traceEvents"] if ev.get("name") == "PE 0 futures"]
