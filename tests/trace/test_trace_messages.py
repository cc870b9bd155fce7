"""Message arrows and bytes in flight: the pairing of numbered sends, deliveries and the
runs they caused (synthetic records), and a real 2-PE job whose arrows and in-flight
bytes are known (trace_messages.py, _native/frames_trace.c)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest
from support.commands import clean_env

from shoal._runtime.trace_file import write_trace
from shoal._runtime.trace_messages import FLOW_BASE, in_flight, pair
from shoal._runtime.tracing import Tracer


def _rec(pe: int, *, sent=(), delivered=(), caused=(), entries=(), offset: float = 0.0) -> dict:
    """A PE's record with numbered messages (times in seconds of its own clock)."""
    t = Tracer(pe, lambda: 10.0)
    for name, t0, t1 in entries:
        t.entry(name, t0, t1)
    rec = t.export(offset=offset)
    rec.update(start=0.0, end=10.0, sent=list(sent), delivered=list(delivered), caused=list(caused))
    return rec


def test_pairs_each_run_with_the_send_of_its_frame_by_source_destination_and_number():
    a = _rec(0, sent=[(1.0, 1, 100, 1), (2.0, 1, 50, 2), (3.0, 1, 7, 3)])
    b = _rec(1, delivered=[(1.5, 0, 100, 1), (2.5, 0, 50, 2), (3.5, 0, 7, 3)],
             caused=[(2.6, 2.7, 0, 2), (2.8, 2.9, 0, 2), (3.6, 3.7, 0, 3), (4.0, 4.1, 0, 9)])
    m = pair([a, b])
    assert m.arrows() == [((0, 1, 2), 2.0, 2.6, 2.7), ((0, 1, 2), 2.0, 2.8, 2.9), ((0, 1, 3), 3.0, 3.6, 3.7)]
    d = m.description()  # message 1 ran nothing (a future's value, say): pairing goes on
    assert d["arrows"] == 3 and d["runs_without_send"] == 1 and d["delivered_before_sent"] == 0


def test_offsets_put_both_pes_on_one_time_line_and_a_delivery_before_its_send_is_counted():
    a = _rec(0, sent=[(1.0, 1, 8, 1)], offset=5.0)  # PE 0's clock reads 5 s behind
    b = _rec(1, delivered=[(5.5, 0, 8, 1)], caused=[(5.6, 5.7, 0, 1)])
    m = pair([a, b], base=1.0)
    assert m.arrows() == [((0, 1, 1), 5.0, pytest.approx(4.6), pytest.approx(4.7))]
    assert m.skewed == 1 and m.skew == pytest.approx(0.5)  # 6.0 sent, 5.5 delivered
    assert in_flight(m) == {1: [(5.0, 0)]}  # counted for no time, not as negative


def test_bytes_in_flight_per_destination_rise_at_each_send_and_fall_at_its_delivery():
    a = _rec(0, sent=[(1.0, 1, 1000, 1), (2.0, 1, 24, 2), (2.0, 0, 5, 1)])
    b = _rec(1, delivered=[(3.0, 0, 1000, 1), (2.5, 0, 24, 2)])
    m = pair([a, b])
    assert in_flight(m) == {1: [(1.0, 1000), (2.0, 1024), (2.5, 1000), (3.0, 0)],
                            0: [(2.0, 5)]}  # never delivered: in flight to the end


def test_the_file_has_a_flow_from_a_send_slice_to_the_run_and_the_run_names_its_sender(tmp_path):
    a = _rec(0, sent=[(1.0, 1, 100, 1)], entries=[("W.go", 0.9, 1.1)])
    b = _rec(1, delivered=[(1.5, 0, 100, 1)], caused=[(1.6, 1.8, 0, 1)], entries=[("W.hit", 1.6, 1.8)])
    path = tmp_path / "t.json"
    write_trace(path, [a, b])
    data = json.loads(path.read_text())
    events = data["traceEvents"]
    start = next(e for e in events if e.get("ph") == "s")
    end = next(e for e in events if e.get("ph") == "f")
    assert start["id"] == end["id"] == FLOW_BASE and start["cat"] == end["cat"] == "message"
    assert (start["tid"], end["tid"], end["bp"]) == (1, 2, "e")
    bound = next(e for e in events if e.get("cat") == "message" and e.get("ph") == "X")
    assert bound["tid"] == 1 and bound["ts"] == start["ts"] and bound["args"] == {"to": 1, "number": 1, "bytes": 100}
    run = next(e for e in events if e.get("name") == "W.hit")
    assert run["ts"] < end["ts"] < run["ts"] + run["dur"]  # the arrow's head is inside the run
    assert run["args"]["from"] == "PE 0" and run["args"]["sent"] == pytest.approx(start["ts"])
    flight = [(e["ts"], e["args"]["bytes"]) for e in events if e.get("name") == "PE 1 bytes in flight"]
    assert [b for _, b in flight] == [100, 0] and flight[1][0] - flight[0][0] == pytest.approx(0.5e6)
    assert data["otherData"]["shoal"]["messages"]["arrows"] == 1


def test_a_malformed_message_event_is_left_out_not_the_trace(tmp_path):
    b = _rec(1, caused=[(1.6, 1.5, 0, 1), (1.6, 1.8, -1, 1)])
    dropped = write_trace(tmp_path / "t.json", [_rec(0), b])
    assert dropped.counts == {(1, "caused"): 2}


PROGRAM = textwrap.dedent('''
    import time

    import numpy as np

    import shoal


    class W(shoal.Chare):
        def __init__(self):
            self.n = 0

        def hit(self, x):
            self.n += x

        def val(self, x):
            return x * 2

        def where(self):
            return shoal.my_pe()

        def nap(self, seconds):
            time.sleep(seconds)

        def big(self, a):
            self.n += int(a[0])


    async def main(args):
        arr = shoal.Array(W, 4)
        await arr.val(0, ret=True)  # every element made before the calls below
        pes = [await arr[k].where(ret=True) for k in range(4)]
        far = [k for k in range(4) if pes[k] == 1]
        near = [k for k in range(4) if pes[k] == 0]
        arr[far[0]].hit(5)  # an entry-method call, compiled path
        arr[far[0]].hit(x=2)  # one with keywords: the Python path on both sides
        await arr[far[1]].val(7, ret=True)  # a ret=True call
        arr.hit(1)  # a broadcast
        arr.migrate(near[0], 1)
        while await arr[near[0]].where(ret=True) != 1:
            pass
        arr[near[0]].hit(9)  # to an element that moved to PE 1
        arr[far[1]].nap(0.3)
        arr[far[1]].big(np.ones(1 << 18))  # 2 MiB: by rendezvous, delivered once the nap ends
        await arr[far[1]].val(0, ret=True)
        print("RESULT", far)
        shoal.exit()


    shoal.start(main)
''')


@pytest.mark.mpi
def test_a_traced_job_draws_an_arrow_from_each_send_to_the_run_it_caused(tmp_path):
    prog = tmp_path / "arrows.py"
    prog.write_text(PROGRAM)
    out = tmp_path / "t.json"
    proc = subprocess.run([sys.executable, "-m", "shoal", "run", "-n", "2", "--trace", str(out), str(prog)],
                          capture_output=True, text=True, timeout=180, env=clean_env(), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    far = json.loads(proc.stdout.split("RESULT ")[1].splitlines()[0])  # the elements on PE 1 from the start
    data = json.loads(out.read_text())
    events = data["traceEvents"]
    starts = {e["id"]: e for e in events if e.get("ph") == "s" and e.get("cat") == "message"}
    ends = {e["id"]: e for e in events if e.get("ph") == "f" and e.get("cat") == "message"}
    assert starts and starts.keys() == ends.keys()
    runs = [e for e in events if e.get("cat") == "entry" and e.get("tid") == 2 and e["name"].startswith("W.")]

    def arrowed(name: str, element: int) -> list[dict]:
        """PE 1's runs of ``name`` on ``element`` with an arrow's head inside, from PE 0."""
        found = []
        for run in runs:
            if run["name"] != name or run["args"].get("element") != f"[{element}]":
                continue
            heads = [i for i, e in ends.items() if e["tid"] == 2 and run["ts"] <= e["ts"] <= run["ts"] + run["dur"]]
            if heads and all(starts[i]["tid"] == 1 and starts[i]["ts"] <= ends[i]["ts"] for i in heads):
                assert run["args"]["from"] == "PE 0"
                found.append(run)
        return found

    assert len(arrowed("W.hit", far[0])) == 3  # the compiled call, the Python one, the broadcast's
    assert arrowed("W.val", far[1])  # the ret=True call
    hits = arrowed("W.hit", far[1])  # far[1] has only the broadcast's hit
    assert len(hits) == 1
    moved = [r for r in runs if r["name"] == "W.hit" and r["args"]["element"] not in (f"[{k}]" for k in far)]
    assert moved and arrowed("W.hit", int(moved[0]["args"]["element"][1:-1]))  # the migrated element
    big = arrowed("W.big", far[1])
    assert len(big) == 1
    # the 2 MiB message was in flight to PE 1 from its send until the nap ended: 0.3 s
    flight = sorted((e["ts"], e["args"]["bytes"]) for e in events if e.get("name") == "PE 1 bytes in flight")
    over = [(t, b) for t, b in flight if b >= 2 << 20]
    assert over, flight
    rise = over[0][0]
    fall = next(t for t, b in flight if t > rise and b < 2 << 20)
    assert 0.2e6 <= fall - rise <= big[0]["ts"] - rise + 1, (rise, fall)
    messages = data["otherData"]["shoal"]["messages"]
    assert messages["arrows"] == len(starts)
    # one node shares its clocks: deliveries may read before their sends by the reads' own
    # error, a few µs (docs/tracing.md), never by a descheduled PE's hundreds
    assert messages["delivered_before_sent"] == 0 or messages["largest_skew_us"] < 5, messages


@pytest.mark.mpi
def test_summary_mode_numbers_no_message(tmp_path):
    prog = tmp_path / "arrows.py"
    prog.write_text(PROGRAM)
    out = tmp_path / "t.json"
    proc = subprocess.run([sys.executable, "-m", "shoal", "run", "-n", "2", "--trace", str(out),
                           "--trace-summary", "10ms", str(prog)],
                          capture_output=True, text=True, timeout=180, env=clean_env(), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(out.read_text())
    assert not [e for e in data["traceEvents"] if e.get("cat") == "message"]
    assert "messages" not in data["otherData"]["shoal"]
