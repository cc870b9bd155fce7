"""``shoal trace report``: its computations on synthetic traces, summary-mode bins, bad
input (one line on stderr, never a traceback), a real 2-PE job, and the page in Chromium."""

from __future__ import annotations

import json
import platform
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from support.commands import clean_env
from support import EXAMPLES
from support.browser import chromium, rendered, screenshot

pytest.importorskip("plotly", reason="shoal trace report draws with Plotly (pip install plotly, or shoal[test])")

from shoal.cli import main as shoal_main
from shoal.errors import ShoalError
from shoal.trace.analysis import analyze, coverage, method_totals, outliers, usage
from shoal.trace.findings import findings
from shoal.trace.read import read_trace
from shoal.trace.report import write_report
from shoal.trace.summary import load_trace, summarize
from shoal._runtime.trace_bins import SummaryTracer
from shoal._runtime.trace_file import new_tracer, write_trace
from shoal._runtime.tracing import Tracer


class Clock:
    def __init__(self, t: float = 0.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


class Work:
    """Stands for a chare: a class whose functions are entry methods."""

    def __init__(self, index: tuple) -> None:
        self.index = index

    def step(self) -> None: ...

    def reduce(self) -> None: ...


def _imbalanced(make=Tracer) -> list[dict]:
    """Two PEs over 1 s: PE 0 works all of it (element (0,)); PE 1 works the first half
    (element (1,)) and waits the second; PE 1 sends PE 0 three messages of 1000 bytes."""
    recs = []
    for pe in (0, 1):
        clock = Clock(0.0)
        t = make(pe, clock)
        el = Work((pe,))
        end = 1.0 if pe == 0 else 0.5
        for k in range(10):  # ten runs of Work.step filling [0, end)
            t.run(el, Work.step, k * end / 10, (k + 1) * end / 10)
        if pe == 1:
            t.idle(0.5, 1.0)
            for k in range(3):
                t.send(0.1 * (k + 1), 0, 1000)
        clock.t = 1.0
        rec = t.export()
        rec["cpu"] = end  # the process had the CPU while it worked (the fake clock's time)
        recs.append(rec)
    return recs


def _waiting(make=Tracer) -> list[dict]:
    """:func:`_imbalanced` with PE 0's scheduler queue at 40 from 0.2 s to 0.3 s (then 0)
    and two futures: one made at 0.1 s and resolved at 0.4 s, one made at 0.6 s and never
    resolved."""
    recs = []
    for pe in (0, 1):
        clock = Clock(0.0)
        t = make(pe, clock)
        t.run(Work((pe,)), Work.step, 0.0, 0.5)
        if pe == 0:
            for when, waiting in ((0.2, 40), (0.3, 0)):
                clock.t = when
                if t.binned:
                    t.queued(waiting)
                else:
                    t._queued_last = waiting
                    t._queue.append((when, waiting))
            if t.binned:
                t.future_done(0.1, 0.4)
            else:
                t._futures.append((0.1, 0.4, 1, "prog.py:3 in main"))
            t._open_futures[2] = 0.6
            if not t.binned:  # a full timeline writes a begin without an end for it (a job cut short)
                t._futures.append((0.6, 0.6, 2, "prog.py:4 in main"))
        clock.t = 1.0
        recs.append(t.export())
    return recs


def _trace(tmp_path: Path, recs: list[dict], name: str = "t.json") -> Path:
    path = tmp_path / name
    write_trace(path, recs, meta={"pes": len(recs)})
    return path


# -- the computations ---------------------------------------------------------------------------
def test_coverage_splits_intervals_at_bin_edges():
    edges = np.array([0.0, 10.0, 20.0, 30.0])
    got = coverage(np.array([5.0, 12.0, 0.0]), np.array([15.0, 14.0, 30.0]), edges)
    assert np.allclose(got, [5 + 10, 5 + 2 + 10, 10])


def test_usage_findings_and_methods_of_an_imbalanced_trace(tmp_path):
    an = analyze(read_trace(_trace(tmp_path, _imbalanced())).data)
    assert an.rows == ["PE 0", "PE 1"] and an.methods == ["Work.step"]
    u = usage(an)
    assert np.allclose(u["work"], [1e6, 0.5e6], rtol=1e-6) and np.allclose(u["idle"], [0, 0.5e6], rtol=1e-6)
    assert np.allclose(u["span"], [1e6, 1e6], rtol=1e-6) and np.allclose(u["overhead"], 0, atol=1.0)
    f = findings(an)
    assert f.bottleneck == "PE 0"
    assert f.imbalance == pytest.approx(0.25, abs=1e-6)  # (2 * 1 s - 1.5 s) of 2 PE-seconds
    assert f.communication == pytest.approx(0.0, abs=1e-6) and f.balanced_time == pytest.approx(0.75)
    assert any("--lb greedy" in a for a in f.advice), f.advice
    assert "bottleneck is PE 0" in " ".join(f.sentences)
    top = method_totals(an)[0]
    assert top["name"] == "Work.step" and top["calls"] == 20 and top["total"] == pytest.approx(1.5e6)
    assert an.comm_count[1, 0] == 3 and an.comm_bytes[1, 0] == 3000 and an.comm_count[0].sum() == 0
    assert an.slice_element[0] == "[0]" and an.slice_element[-1] == "[1]"
    assert [o["name"] for o in outliers(an, k=1)] in (["PE 0"], ["PE 1"])


def test_a_full_trace_has_a_busy_counter_per_pe_for_perfetto(tmp_path):
    events = json.loads(_trace(tmp_path, _imbalanced()).read_text())["traceEvents"]
    busy = {pe: [ev["args"]["busy"] for ev in events if ev.get("ph") == "C" and ev["name"] == f"PE {pe} busy %"]
            for pe in (0, 1)}
    assert len(busy[0]) == len(busy[1]) == 512
    assert min(busy[0]) > 99 and busy[1][10] > 99 and busy[1][-10] == 0  # PE 1 works the first half only
    sent = [ev["args"]["MB/s"] for ev in events if ev.get("ph") == "C" and ev["name"] == "PE 1 sent MB/s"]
    assert len(sent) == 512 and sum(sent) * (1.0 / 512) == pytest.approx(3000 / 1e6, rel=1e-6)
    assert not [ev for ev in events if ev.get("ph") == "C" and ev["name"] == "PE 0 sent MB/s"]  # sent nothing


def test_each_migration_is_an_arrow_in_perfetto_and_on_the_timeline(tmp_path):
    from shoal.trace.figures import timeline

    recs = []
    for pe in (0, 1):  # Work[5] goes 0 -> 1 twice (and back between), Work[6] 1 -> 0 once
        t = Tracer(pe, Clock(0.0))
        t.run(Work((5,)), Work.step, 0.0, 0.1)
        for k, (what, src, dst) in enumerate([("Work[5]", 0, 1), ("Work[6]", 1, 0), ("Work[5]", 1, 0),
                                               ("Work[5]", 0, 1)]):
            if pe in (src, dst):
                t.migration(0.2 + 0.1 * k + 0.01 * (pe == dst), 0.2 + 0.1 * k + 0.01 * (pe == dst) + 0.005,
                            what, src, dst, 100)
        recs.append(t.export())
    events = json.loads(_trace(tmp_path, recs).read_text())["traceEvents"]
    flows = {(ev["id"], ev["ph"]): ev for ev in events if ev.get("ph") in ("s", "f")}
    assert sorted(flows) == [(k, ph) for k in (1, 2, 3, 4) for ph in ("f", "s")]
    slices = [ev for ev in events if ev.get("cat") == "migration" and ev.get("ph") == "X"]
    for (k, ph), ev in flows.items():  # each end inside its slice: a departure's on its PE, an arrival's on the other
        (inside,) = [s for s in slices if s["tid"] == ev["tid"] and s["ts"] <= ev["ts"] <= s["ts"] + s["dur"]]
        assert inside["name"] == ("migrate out" if ph == "s" else "migrate in")
        assert inside["args"]["element"] == flows[k, "s"]["name"].removeprefix("migrate ")
    fig, _ = timeline(analyze(read_trace(tmp_path / "t.json").data))
    (path,) = [tr for tr in fig.data if tr.name == "migration path"]
    assert list(path.x).count(None) == 4


def test_a_trace_with_little_work_gives_no_advice_from_its_split(tmp_path):
    recs = []
    for pe in (0, 1):
        t = Tracer(pe, Clock(0.0))
        t.run(Work((pe,)), Work.step, 0.5, 0.501)
        t.idle(0.6, 0.9)
        rec = t.export()
        rec["end"], rec["cpu"] = 1.0, 1.0
        recs.append(rec)
    f = findings(analyze(read_trace(_trace(tmp_path, recs)).data))
    assert len(f.advice) == 1 and f.advice[0].startswith("Entry methods took only 0.1% of the PEs' time")


def test_pes_that_lacked_the_cpu_are_named(tmp_path):
    recs = _imbalanced()
    recs[1]["cpu"] = 0.25  # worked 0.5 s of wall time with 0.25 s of CPU
    f = findings(analyze(read_trace(_trace(tmp_path, recs)).data))
    assert any(s.startswith("PE 1 had the CPU for only 50%") for s in f.sentences), f.sentences
    assert any("Other processes share the cores" in a for a in f.advice)
    assert not any("had the CPU" in s for s in findings(analyze(read_trace(_trace(tmp_path, _imbalanced(), "ok.json"))
                                                                  .data)).sentences)


def test_periods_between_rounds_show_what_the_round_changed(tmp_path):
    from shoal.trace.figures import balance_view
    from shoal.trace.rounds import periods, rounds, spread

    recs = _rounds_trace(Tracer)
    an = analyze(read_trace(_trace(tmp_path, recs)).data)
    assert [(a / 1e3, b / 1e3) for a, b in rounds(an)] == [pytest.approx((500, 510))]
    before, after = periods(an)
    assert before.work / 1e3 == pytest.approx([400, 0]) and spread(before.work) == pytest.approx(2.0)
    assert after.work / 1e3 == pytest.approx([200, 200]) and spread(after.work) == pytest.approx(1.0)
    assert before.elements == {"Work[0]": (pytest.approx(2e5), 0), "Work[1]": (pytest.approx(2e5), 0)}
    assert after.elements["Work[1]"] == (pytest.approx(2e5), 1)  # it moved to PE 1
    f = findings(an)
    assert any("2.00x the mean work before the first and 1.00x after the last" in s for s in f.sentences)
    assert any("balance sooner" in a for a in f.advice), f.advice
    assert any(s.startswith("Round 1 began 100 ms after the last entry method") for s in f.sentences)
    assert balance_view(an) is not None
    binned = analyze(read_trace(_trace(tmp_path, _rounds_trace(lambda pe, c: SummaryTracer(pe, 0.01, c)),
                                       "bins.json")).data)
    assert [spread(p.work) for p in periods(binned)] == [pytest.approx(2.0, rel=0.05), pytest.approx(1.0, rel=0.05)]
    assert periods(binned)[0].elements == {}  # bins keep no run's element


def _rounds_trace(make) -> list[dict]:
    recs = []
    for pe in (0, 1):  # before the round at 0.5 s PE 0 runs both elements; after it, one each
        t = make(pe, Clock(0.0))
        if pe == 0:
            t.run(Work((0,)), Work.step, 0.0, 0.2)
            t.run(Work((1,)), Work.step, 0.2, 0.4)
        t.balance(0.5, 0.51 if pe == 0 else 0.505, "Work", 1, "greedy")
        t.run(Work((pe,)), Work.step, 0.6, 0.8)
        t.idle(0.8, 1.0)
        recs.append(t.export())
    return recs


def test_a_balanced_run_with_busy_rounds_is_told_to_balance_less(tmp_path):
    recs = []
    for pe in (0, 1):  # even work between rounds at 0.2, 0.4 and 0.6 s that each move 6 elements
        t = Tracer(pe, Clock(0.0))
        for a, b in ((0.0, 0.19), (0.21, 0.39), (0.41, 0.59), (0.61, 1.0)):
            t.run(Work((pe,)), Work.step, a, b)
        for k in (1, 2, 3):
            t.balance(0.2 * k, 0.2 * k + 0.001, "Work", 6, "greedy")
        recs.append(t.export())
    f = findings(analyze(read_trace(_trace(tmp_path, recs)).data))
    assert f.imbalance < 0.01
    assert any(a.startswith("Rounds 1, 2, 3 found the load even already (spread 1.10x or less before it) yet "
                            "moved 6, 6, 6 elements: greedy recomputes") and "Balance less often" in a
               for a in f.advice), f.advice


def test_the_timeline_of_many_pes_draws_the_telling_ones(tmp_path):
    from shoal.trace.figures import MAX_ROWS, timeline, timeline_rows

    recs = []
    for pe in range(40):  # PE 7 works twice as long as the others
        t = Tracer(pe, Clock(0.0))
        t.run(Work((pe,)), Work.step, 0.0, 0.2 if pe == 7 else 0.1)
        t.idle(0.2 if pe == 7 else 0.1, 0.3)
        recs.append(t.export())
    an = analyze(read_trace(_trace(tmp_path, recs)).data)
    rows = timeline_rows(an)
    assert len(rows) == MAX_ROWS and 7 in rows
    fig, note = timeline(an)
    assert f"{MAX_ROWS} PEs of 40 are drawn" in note
    assert {y for trace in fig.data for y in (trace.y or ()) if y} <= {an.rows[r] for r in rows}


# -- summary mode ---------------------------------------------------------------------------------
def test_summary_tracer_bins_keep_the_totals_and_stay_bounded():
    clock = Clock(0.0)
    t = SummaryTracer(0, 0.01, clock, cap=64)
    el = Work((0,))
    for k in range(1000):  # 10 s of 7 ms runs every 10 ms: 640 bins of 10 ms would be past the cap
        t.run(el, Work.step, k * 0.01, k * 0.01 + 0.007)
        t.send(k * 0.01, 1, 100)
    t.idle(9.995, 10.5)  # spans the last bins
    clock.t = 10.5
    b = t.export()["bins"]
    assert len(b["idle"]) <= 64 and b["width"] >= 0.01 * 16  # doubled 4 times at least
    assert sum(b["busy"][0]) == pytest.approx(7.0) and sum(b["calls"][0]) == 1000
    assert sum(b["idle"]) == pytest.approx(0.505) and sum(b["sent"]) == 100_000 and b["to"] == {1: [1000, 100_000]}
    assert t.export()["entries"] == []  # no event kept per run


class Ticks:
    """Stands for core_contract.TickClock: 1000 ticks a second from tick 5000 at 2.0 s."""

    origin = (5000, 2.0)
    scale = 1e-3

    def seconds_per_tick(self) -> float:
        return self.scale


class Core:
    """Stands for the compiled core's side of tracing (_native/trace.c): what the tracer
    asked for, and the runs it hands over at export."""

    def __init__(self, runs: list) -> None:
        self.runs, self.into = runs, None

    def trace_into(self, tracer, origin: int, width: int) -> None:
        self.into = (tracer, origin, width)

    def trace_flush(self) -> None:
        runs, self.runs = self.runs, []
        if runs:
            self.into[0](runs)


@pytest.mark.parametrize("make", [lambda: Tracer(0, Clock(0.0)), lambda: SummaryTracer(0, 0.5, Clock(0.0))])
def test_the_compiled_paths_runs_in_ticks_become_seconds(make):
    t = make()
    core = Core([(Work, Work.step, 5500, 6000, (4,), 1, 500, 0),  # 2.5 s to 3.0 s
                 (Work, Work.step, 5100, 5200, (4,), 1, 100, 0)])  # 2.1 s to 2.2 s
    t.use_core(core, Ticks())
    rec = t.export()
    if "bins" in rec:  # bins of 0.5 s from 0.0 s: 500 ticks from tick 3000
        assert core.into[1:] == (3000, 500)
        busy = rec["bins"]["busy"][0]
        assert sum(busy) == pytest.approx(0.6) and busy[5] == pytest.approx(0.5) and busy[4] == pytest.approx(0.1)
        assert sum(rec["bins"]["calls"][0]) == 2
    else:
        assert core.into[1:] == (0, 0)  # every run kept
        assert rec["entries"] == [(0, pytest.approx(2.5), pytest.approx(3.0), (4,)),
                                  (0, pytest.approx(2.1), pytest.approx(2.2), (4,))]
    assert rec["names"] == ["Work.step"]


def test_a_summary_takes_a_bins_runs_added_up_and_splits_a_run_over_bins():
    t = SummaryTracer(0, 0.5, Clock(0.0))
    core = Core([(Work, Work.step, 5010, 5090, (4,), 3, 60, 0),  # 3 calls in 2.01 s to 2.09 s: 0.06 s busy
                 (Work, Work.step, 5400, 5600, (1,), 1, 200, 0)])  # 2.4 s to 2.6 s: over the edge at 2.5 s
    t.use_core(core, Ticks())
    b = t.export()["bins"]
    assert b["calls"][0][4] == 4 and b["calls"][0][5] == 0
    assert b["busy"][0][4] == pytest.approx(0.06 + 0.1) and b["busy"][0][5] == pytest.approx(0.1)


def test_summary_events_before_tracing_began_go_to_the_first_bin():
    t = SummaryTracer(0, 0.01, Clock(5.0))
    t.run(Work((0,)), Work.step, 4.999, 4.9995)  # a clock read a little before the tracer's start
    t.idle(4.998, 5.001)
    t.send(4.9, 1, 10)
    b = t.export()["bins"]
    assert b["busy"][0][0] == pytest.approx(0.0005) and b["sent"][0] == 10
    assert b["idle"][0] == pytest.approx(0.003)  # all of it, in the first bin


def test_new_tracer_picks_the_mode_and_marks_a_restart():
    assert type(new_tracer(0)) is Tracer and type(new_tracer(0, 0.01)) is SummaryTracer
    assert new_tracer(0).export()["marks"] == []
    (mark,) = new_tracer(1, 0.01, "/ckpt/step-40").export()["marks"]
    assert mark[0] == "restart" and mark[2] == {"checkpoint": "/ckpt/step-40"}


def test_summary_trace_draws_the_same_usage_as_a_full_one(tmp_path):
    full = analyze(read_trace(_trace(tmp_path, _imbalanced(), "full.json")).data)
    summary_path = _trace(tmp_path, _imbalanced(lambda pe, clock: SummaryTracer(pe, 0.01, clock)), "sum.json")
    data = json.loads(summary_path.read_text())
    assert any(ev.get("ph") == "C" and ev["name"] == "PE 1 busy %" for ev in data["traceEvents"])
    binned = analyze(read_trace(summary_path).data)
    assert binned.summary_mode and not len(binned.slice_dur)
    for key in ("work", "idle", "span"):
        assert np.allclose(usage(binned)[key], usage(full)[key], rtol=0.01, atol=2e3), key
    assert binned.comm_count[1, 0] == 3
    assert findings(binned).bottleneck == "PE 0"
    table = summarize(load_trace(summary_path))  # shoal trace summary reads the bins too
    assert [p.busy for p in table.pes] == [pytest.approx(1.0, rel=0.01), pytest.approx(0.5, rel=0.01)]
    assert table.pes[1].idle == pytest.approx(0.5, rel=0.01) and table.methods[0].count == 20
    page = tmp_path / "sum.html"
    write_report(summary_path, page)
    assert "Recorded in summary mode" in page.read_text()


@pytest.mark.parametrize("summary", [False, True])
def test_the_queue_and_futures_reach_the_reports_grid(tmp_path, summary):
    make = (lambda pe, clock: SummaryTracer(pe, 0.01, clock)) if summary else Tracer
    path = _trace(tmp_path, _waiting(make))
    data = json.loads(path.read_text())
    if not summary:  # the second future's slice is left open, as a job cut short leaves it
        data["traceEvents"] = [ev for ev in data["traceEvents"]
                               if not (ev.get("cat") == "future" and ev["ph"] == "e" and ev["id"] % 2**32 == 2)]
    an = analyze(data)
    assert an.summary_mode == summary
    mid = (an.edges[:-1] + an.edges[1:]) / 2
    assert an.queue[0].max() == 40 and not an.queue[1].any()
    held = mid[an.queue[0] == 40]  # the bins where the queue was 40: from 0.2 s to 0.3 s
    assert held.min() == pytest.approx(0.2e6, abs=2 * an.width) and held.max() == pytest.approx(0.3e6, abs=2 * an.width)
    assert an.futures_made.sum() == 2 and an.futures_resolved.sum() == 1
    assert an.future_wait.max() == pytest.approx(0.3e6, rel=0.01)
    assert mid[an.futures_resolved[0] > 0][0] == pytest.approx(0.4e6, abs=an.width)
    from shoal.trace.report import report_html
    from shoal.trace.waiting import queue_view

    fig = queue_view(an)
    names = [tr.name for tr in fig.data]
    assert names == ["PE 0 queue", "futures made", "futures resolved", "longest wait (ms)"]
    assert "id='view-queue'" in report_html(an, "t")
    assert queue_view(analyze(json.loads(_trace(tmp_path, _imbalanced(), "none.json").read_text()))) is None


@pytest.mark.parametrize("text, seconds", [("10ms", 0.01), ("500us", 5e-4), ("0.5s", 0.5), ("2", 2.0), ("1m", 60.0)])
def test_trace_summary_bin_widths(text, seconds):
    from shoal.commands import _bin_width

    assert _bin_width(text) == pytest.approx(seconds)


def test_trace_summary_needs_a_trace_file_and_a_sane_bin(tmp_path):
    prog = tmp_path / "p.py"
    prog.write_text("raise SystemExit('must not run')\n")
    env = clean_env()
    for argv, message in ((["--trace-summary", "10ms"], "--trace-summary 0.01s needs a trace file: add --trace PATH"),
                          (["--trace", str(tmp_path / "t.json"), "--trace-summary", "0"],
                           "'0' is not a bin width such as 10ms, 500us or 1s")):
        proc = subprocess.run([sys.executable, "-m", "shoal", "run", "-n", "2", "--transport", "inproc", *argv,
                               str(prog)], capture_output=True, text=True, timeout=120, env=env)
        assert proc.returncode == 2 and message in proc.stderr and "must not run" not in proc.stderr, proc


# -- the page and the command ---------------------------------------------------------------------
VIEWS = ("timeline", "usage", "overview", "profile", "comm", "queue", "hist", "outliers")  # "balance": rounds only


def _with_queue(recs: list[dict]) -> list[dict]:
    """``recs`` with :func:`_waiting`'s queue and futures on PE 0 (for the queue view)."""
    extra = _waiting()[0]
    return [{**recs[0], "queue": extra["queue"], "futures": extra["futures"][:1]}, *recs[1:]]


def test_report_page_is_self_contained_with_every_view(tmp_path, capsys):
    path = _trace(tmp_path, _with_queue(_imbalanced()))
    assert shoal_main(["trace", "report", str(path), "-o", str(tmp_path / "r.html")]) == 0
    assert "2 PEs, 20 entry-method runs" in capsys.readouterr().out
    page = (tmp_path / "r.html").read_text()
    for view in VIEWS:
        assert f"id='view-{view}'" in page, view
    assert "In words" in page and "bottleneck is PE 0" in page and "element %{customdata[0]}" in page
    assert "<script src=" not in page and "<link " not in page  # nothing fetched: Plotly's JS is inline
    assert page.count("Plotly.newPlot") >= len(VIEWS)
    assert shoal_main(["trace", "report", str(path), "-o", str(tmp_path / "some.html"), "--views", "words,usage"]) == 0
    some = (tmp_path / "some.html").read_text()
    assert "In words" in some and "id='view-usage'" in some and "id='view-timeline'" not in some
    assert shoal_main(["trace", "report", str(path), "--views", "words,gantt"]) == 2
    assert "unknown view gantt; the views are words, methods, timeline" in capsys.readouterr().err


# -- bad input ----------------------------------------------------------------------------------
def _report(tmp_path: Path, name: str, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "shoal", "trace", "report", str(tmp_path / name),
                           "-o", str(tmp_path / "out.html"), *extra], capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("name, content, message", [
    ("empty.json", b"", "is empty (0 bytes)"),
    ("text.json", b"hello, world", "is not a trace: invalid JSON at line 1"),
    ("binary.json", b"\xff\xfe\x00\x01", "it is not text"),
    ("object.json", b'{"events": []}', 'a JSON object with a "traceEvents" list'),
    ("missing.json", None, "not found"),
    ("bins.json", b'{"traceEvents": [], "otherData": {"shoal": {"format": "shoal.trace/1", "pes": [{"pe": 0, '
                  b'"tid": 1, "start": 0, "end": 9}], "summary": {"pes": [{"tid": 1, "origin": 0, "width": 1, '
                  b'"busy": {"A.b": [1, "x"]}}]}}}}', "summary-mode bins (otherData.shoal.summary) are malformed"),
])
def test_bad_traces_are_one_line_and_exit_2(tmp_path, name, content, message):
    if content is not None:
        (tmp_path / name).write_bytes(content)
    proc = _report(tmp_path, name)
    assert proc.returncode == 2 and proc.stdout == "", proc
    assert proc.stderr.startswith("shoal trace report: ") and proc.stderr.count("\n") == 1, proc.stderr
    assert message in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "out.html").exists()


def test_another_versions_trace_is_refused(tmp_path):
    path = _trace(tmp_path, _imbalanced())
    path.write_text(path.read_text().replace('"format": "shoal.trace/1"', '"format": "shoal.trace/7"'))
    proc = _report(tmp_path, path.name)
    assert proc.returncode == 2 and "another shoal version (trace format 'shoal.trace/7')" in proc.stderr, proc


def test_a_trace_over_the_bound_is_refused_before_it_is_read(tmp_path):
    path = _trace(tmp_path, _imbalanced())
    proc = _report(tmp_path, path.name, "--max-mb", "0.001")
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc
    assert "over the report's bound of 1.0 KiB" in proc.stderr and "--trace-summary" in proc.stderr
    with pytest.raises(ShoalError, match="over the report's bound"):
        read_trace(path, max_bytes=100)


def test_a_gzipped_trace_is_read_and_bounded_as_it_unpacks(tmp_path, capsys):
    import gzip

    packed = tmp_path / "t.json.gz"
    packed.write_bytes(gzip.compress(_trace(tmp_path, _imbalanced()).read_bytes()))
    assert shoal_main(["trace", "report", str(packed)]) == 0
    assert (tmp_path / "t.html").exists() and "2 PEs, 20 entry-method runs" in capsys.readouterr().out
    bomb = tmp_path / "bomb.json.gz"
    bomb.write_bytes(gzip.compress(b" " * (4 << 20)))  # 4 KiB of file, 4 MiB unpacked
    proc = _report(tmp_path, bomb.name, "--max-mb", "1")
    assert proc.returncode == 2 and "unpacks to more than the report's bound of 1 MiB" in proc.stderr, proc


def test_a_truncated_trace_reports_what_was_recorded(tmp_path):
    path = _trace(tmp_path, _imbalanced())
    text = path.read_text()
    path.write_text(text[: int(len(text) * 0.7)])  # cut mid-line, as a killed writer leaves it
    proc = _report(tmp_path, path.name)
    assert proc.returncode == 0, proc
    assert "note: The trace file ends early" in proc.stderr and "Traceback" not in proc.stderr
    page = (tmp_path / "out.html").read_text()
    assert "The trace file ends early" in page and "id='view-timeline'" in page
    loaded = read_trace(path)
    assert loaded.truncated and 0 < len(loaded.data["traceEvents"]) < text.count("\n")


# -- a real job -------------------------------------------------------------------------------------
IMBALANCED = """
import time
import shoal

class W(shoal.Chare):
    def work(self, k, done):
        end = time.perf_counter() + (0.002 if self.index[0] < 4 else 0.0005)
        while time.perf_counter() < end:
            pass
        self.contribute(None, shoal.reducers.nop, done)

def main(args):
    w = shoal.Array(W, 8)
    for k in range(10):
        done = shoal.Future()
        w.work(k, done)
        done.get()
    shoal.exit()


shoal.start(main)
"""


@pytest.mark.mpi
@pytest.mark.parametrize("summary", ["", "0.005"])
def test_a_traced_two_pe_job_makes_a_report(mpi_job, tmp_path, summary):
    trace = tmp_path / "job.json"
    env = {"SHOAL_TRACE": str(trace)}
    if summary:
        env["SHOAL_TRACE_SUMMARY"] = summary
    job = mpi_job(IMBALANCED, n=2, env=env)
    assert job.returncode == 0, job
    an = write_report(trace, tmp_path / "job.html")
    assert an.rows == ["PE 0", "PE 1"] and "W.work" in an.methods and an.summary_mode == bool(summary)
    assert round(float(an.calls[:, an.methods.index("W.work")].sum())) == 80
    assert findings(an).bottleneck == "PE 0"  # its four elements spin 2 ms a step, PE 1's 0.5 ms
    if not summary:
        assert sorted(set(an.slice_element[i] for i in np.flatnonzero(an.slice_row == 1)
                          if an.methods[an.slice_method[i]] == "W.work")) == [f"[{k}]" for k in range(4, 8)]


MANY_RUNS = """
    import time
    import shoal

    class W(shoal.Chare):
        def val(self, x):
            return x

    def main(args):
        arr = shoal.Array(W, 400)
        for k in range(25):
            assert sum(arr.val(1, ret=True).get()) == 400
            time.sleep(0.002)  # the runs of the next broadcast go in later bins
        shoal.exit()

    shoal.start(main)
    """


@pytest.mark.mpi
@pytest.mark.parametrize("summary", ["", "0.001"])
def test_every_run_of_the_compiled_path_is_on_the_timeline(mpi_job, tmp_path, summary):
    """10,000 entry-method runs of ret=True broadcasts, which the compiled core runs and
    records itself (_native/trace.c: each run, or in summary mode each method's runs per
    1 ms bin, added up): the trace counts every one of them, on each PE its share."""
    trace = tmp_path / "job.json"
    env = {"SHOAL_TRACE": str(trace), **({"SHOAL_TRACE_SUMMARY": summary} if summary else {})}
    job = mpi_job(MANY_RUNS, n=2, env=env)
    assert job.returncode == 0, job
    an = analyze(read_trace(trace).data)
    calls = an.calls[:, an.methods.index("W.val")].reshape(2, -1).sum(axis=1)  # per PE
    assert an.summary_mode == bool(summary) and [round(float(c)) for c in calls] == [5000, 5000], calls


PING_PONG = """
    import shoal
    from shoal._runtime.context import current

    class P(shoal.Chare):
        def ping(self, n):
            if n:
                self.collection[1 - self.index].ping(n - 1)

        def waits(self):
            tracer = current().tracer
            tracer.core.trace_flush()
            return len(tracer._idle_ticked), tracer.idle_in_core

    def main(args):
        pair = shoal.Group(P)
        pair[0].ping(20000)
        shoal.quiescence().get()
        print("waits", pair.waits(ret=True).get())

    shoal.start(main)
    """


@pytest.mark.mpi
@pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64", "i386", "i686"),
                    reason="the core records the serve loop's waits where its stamps are the time-stamp counter (x86)")
def test_a_traced_job_serves_messages_in_c_and_its_waits_are_on_the_timeline(mpi_job, tmp_path):
    """With a full timeline the engine keeps the compiled serve loop (frames.c), whose
    waits for messages the core records (trace.c): a ping-pong of 20,000 messages leaves
    waits of the serve loop on both PEs, as idle periods in the file."""
    trace = tmp_path / "job.json"
    job = mpi_job(PING_PONG, n=2, env={"SHOAL_TRACE": str(trace)})
    assert job.returncode == 0, job
    waits = eval(job.stdout.split("waits", 1)[1].strip())  # [(count, idle_in_core)] per PE
    assert all(recorded and count > 0 for count, recorded in waits), waits
    events = json.loads(trace.read_text())["traceEvents"]
    idle = [ev for ev in events if ev.get("name") == "idle"]
    assert {ev["tid"] for ev in idle} == {1, 2} and len(idle) >= sum(count for count, _ in waits), len(idle)


@pytest.mark.mpi
def test_checkpoints_and_a_restart_are_marked(mpi_job, tmp_path):
    source = (EXAMPLES / "checkpoint.py").read_text()
    job = mpi_job(source, n=2, args=("--stop", "12"), env={"SHOAL_TRACE": str(tmp_path / "first.json")})
    assert job.returncode == 0, job
    marks = [ev for ev in json.loads((tmp_path / "first.json").read_text())["traceEvents"] if ev.get("cat") == "mark"]
    assert {ev["name"] for ev in marks} == {"checkpoint"} and {ev["tid"] for ev in marks} == {1, 2}
    assert all(ev["args"]["elements"] > 0 and ev["args"]["bytes"] > 0 for ev in marks)
    job = mpi_job(source, n=2, env={"SHOAL_TRACE": str(tmp_path / "again.json"),
                                    "SHOAL_RESTART": str(tmp_path / "heat.ckpt")})
    assert job.returncode == 0, job
    an = analyze(read_trace(tmp_path / "again.json").data)
    restarts = [m for m in an.marks if m["name"] == "restart"]
    assert len(restarts) == 2 and all(m["checkpoint"] == str(tmp_path / "heat.ckpt") for m in restarts)


# -- in a browser ---------------------------------------------------------------------------------
def test_report_renders_in_headless_chromium(tmp_path):
    chromium()
    page = tmp_path / "r.html"
    write_report(_trace(tmp_path, _with_queue(_imbalanced())), page)
    dom = rendered(page)
    for view in VIEWS:  # each view's div holds the SVG Plotly drew into it
        start = dom.index(f'id="plot-{view}"')
        assert 'class="main-svg"' in dom[start:start + 3000], view
    shot = tmp_path / "shot.png"
    screenshot(page, shot)
    from matplotlib.image import imread

    pixels = imread(shot)
    assert pixels.shape[0] >= 1000 and float(pixels[..., :3].std()) > 0.05  # drawn, not a blank page
