"""Timeline traces: the per-PE recorder, the merged Chrome trace file, its summary, and
the command-line and settings plumbing of tracing and load balancing (no runtime needed)."""

from __future__ import annotations

import io
import json
import os
import pickle
import re
import subprocess
import sys
from pathlib import Path

import pytest
from support.commands import clean_env

from shoal.cli import main as shoal_main
from shoal.errors import ShoalError
from shoal.settings import Settings, SettingsError, load_settings
from shoal.trace.summary import load_trace, print_summary, summarize
from shoal._runtime import trace_file, tracing
from shoal._runtime.trace_file import write_trace
from shoal._runtime.tracing import Tracer


class FakeClock:
    def __init__(self, t: float = 100.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def _record(pe: int, base: float = 100.0, offset: float | None = None) -> dict:
    """A PE's record: two Tile.step calls and a Main.run, idle between, a send, a migration,
    a balancing step and a mark; times from ``base`` (seconds)."""
    clock = FakeClock(base)
    t = Tracer(pe, clock)
    t.entry("Tile.step", base + 0.001, base + 0.003)
    t.idle(base + 0.003, base + 0.004)
    t.send(base + 0.0025, (pe + 1) % 2, 4096)
    t.entry("Tile.step", base + 0.004, base + 0.005)
    t.entry("Main.run", base + 0.005, base + 0.009)
    t.migration(base + 0.0091, base + 0.0092, "Tile(3,)", pe, 1 - pe, 8192)
    t.balance(base + 0.0093, base + 0.0095, "tiles", 2, "greedy")
    t.mark("phase", base + 0.0096, step=7, thing=object())
    clock.t = base + 0.010
    rec = t.export() if offset is None else t.export(offset=offset)
    return rec


def _write(tmp_path: Path, records: list[dict], **kw) -> dict:
    path = tmp_path / "trace.json"
    write_trace(path, records, **kw)
    return json.loads(path.read_text())


def _by(events: list[dict], **match) -> list[dict]:
    return [e for e in events if all(e.get(k) == v for k, v in match.items())]


# -- the recorder ------------------------------------------------------------------------------
def test_tracer_interns_names_and_exports_a_picklable_snapshot():
    rec = _record(0)
    assert rec["format"] == tracing.FORMAT and rec["pe"] == 0
    assert rec["names"] == ["Tile.step", "Main.run"]  # each name once; entries index it
    assert [e[0] for e in rec["entries"]] == [0, 0, 1]
    assert rec["start"] == 100.0 and rec["end"] == pytest.approx(100.010) and rec["offset"] == 0.0
    assert len(rec["idle"]) == len(rec["sends"]) == len(rec["migrations"]) == len(rec["balances"]) == 1
    assert rec["marks"][0][0] == "phase" and rec["marks"][0][2]["step"] == 7
    copy = pickle.loads(pickle.dumps({k: v for k, v in rec.items() if k != "marks"}))
    assert copy["entries"] == rec["entries"]
    t = Tracer(3)  # the default clock is perf_counter
    t.entry("A.f", 1.0, 2.0)
    snap = t.export()
    t.entry("A.f", 2.0, 3.0)
    assert len(snap["entries"]) == 1 and len(t) == 2  # export is a snapshot; recording goes on


@pytest.mark.parametrize("pe", [-1, 1.0, True, "0"])
def test_tracer_refuses_a_bad_pe(pe):
    with pytest.raises(ValueError, match="PE number"):
        Tracer(pe)  # type: ignore[arg-type]


# -- the file ----------------------------------------------------------------------------------
def test_write_trace_has_one_named_track_per_pe_and_every_kind_of_event(tmp_path):
    data = _write(tmp_path, [_record(1), _record(0)], meta={"program": "stencil.py", "pes": 2})
    assert data["displayTimeUnit"] == "ms"
    assert data["otherData"]["program"] == "stencil.py" and data["otherData"]["pes"] == 2
    events = data["traceEvents"]
    threads = {e["args"]["name"]: (e["pid"], e["tid"]) for e in _by(events, ph="M", name="thread_name")}
    assert set(threads) == {"PE 0", "PE 1"}
    assert len(set(threads.values())) == 2 and all(pid != 0 and tid != 0 for pid, tid in threads.values())
    assert len(_by(events, ph="M", name="process_name")) == 1
    for pe in (0, 1):
        pid, tid = threads[f"PE {pe}"]
        mine = [e for e in events if (e["pid"], e["tid"]) == (pid, tid) and e["ph"] != "M"]
        entries = _by(mine, ph="X", cat="entry")
        assert [e["name"] for e in entries] == ["Tile.step", "Tile.step", "Main.run"]
        assert [e["ts"] for e in entries] == pytest.approx([1000, 4000, 5000])  # µs from the earliest instant
        assert [e["dur"] for e in entries] == pytest.approx([2000, 1000, 4000])
        (idle,) = _by(mine, ph="X", cat="idle")
        assert idle["ts"] == pytest.approx(3000) and idle["dur"] == pytest.approx(1000)
        (send,) = _by(mine, ph="i", cat="send")
        assert send["ts"] == pytest.approx(2500) and send["args"] == {"to": 1 - pe, "bytes": 4096}
        (move,) = _by(mine, ph="X", cat="migration")
        assert move["name"] == "migrate out" and move["args"] == {"element": "Tile(3,)", "from": pe, "to": 1 - pe,
                                                                   "bytes": 8192}
        (lb,) = _by(mine, ph="X", cat="lb")
        assert lb["args"] == {"collection": "tiles", "strategy": "greedy", "moved": 2} and "tiles" in lb["name"]
        assert lb["dur"] == pytest.approx(200)
        (mark,) = _by(mine, ph="i", cat="mark")
        assert mark["name"] == "phase" and mark["args"]["step"] == 7 and "object" in mark["args"]["thing"]
    own = data["otherData"]["shoal"]
    assert own["format"] == tracing.FORMAT and [p["pe"] for p in own["pes"]] == [0, 1]
    assert own["pes"][0]["start"] == 0 and own["pes"][0]["end"] == pytest.approx(10000)


def test_offsets_put_every_pe_on_one_time_line(tmp_path):
    # PE 1's clock reads 50 s ahead of PE 0's: its offset of -50 s brings it back
    data = _write(tmp_path, [_record(0, base=100.0), _record(1, base=150.0, offset=-50.0)])
    first = {e["tid"]: e["ts"] for e in reversed(data["traceEvents"]) if e.get("cat") == "entry"}
    assert len(first) == 2 and all(ts == pytest.approx(1000) for ts in first.values())
    # without the offset PE 1 starts 50 s later, and times count from PE 0's earliest
    rec = _record(1, base=150.0)
    del rec["offset"]  # absent: 0
    data = _write(tmp_path, [_record(0, base=100.0), rec])
    tid = {e["args"]["name"]: e["tid"] for e in _by(data["traceEvents"], name="thread_name")}["PE 1"]
    ts = min(e["ts"] for e in data["traceEvents"] if e.get("tid") == tid and e.get("cat") == "entry")
    assert ts == pytest.approx(50e6 + 1000)


def test_write_is_atomic(tmp_path, monkeypatch):
    path = tmp_path / "trace.json"
    path.write_text("the previous trace")

    def broken(rec, base, *rest):
        yield '{"name":"x"}'
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(trace_file, "_events", broken)
    with pytest.raises(RuntimeError, match="disk on fire"):
        write_trace(path, [_record(0)])
    assert path.read_text() == "the previous trace" and os.listdir(tmp_path) == ["trace.json"]
    monkeypatch.undo()
    write_trace(str(path), [_record(0)])
    assert json.loads(path.read_text())["traceEvents"] and os.listdir(tmp_path) == ["trace.json"]


def test_a_path_that_cannot_be_written_is_a_clear_error(tmp_path):
    with pytest.raises(ShoalError, match=r"cannot write the trace to .*nope.*: folder .* does not exist"):
        write_trace(tmp_path / "nope" / "trace.json", [_record(0)])
    with pytest.raises(ShoalError, match=r"cannot write the trace to .*: it is a folder; name a file such as"):
        write_trace(tmp_path, [_record(0)])
    with pytest.raises(ShoalError, match="not a file name"):
        write_trace(3, [_record(0)])  # type: ignore[arg-type]
    if os.geteuid() != 0:  # root writes anywhere
        ro = tmp_path / "ro"
        ro.mkdir(mode=0o555)
        with pytest.raises(ShoalError, match="cannot write the trace to .*Permission denied"):
            write_trace(ro / "t.json", [_record(0)])


def _bad(**changes) -> dict:
    rec = _record(0)
    rec.update(changes)
    return rec


@pytest.mark.parametrize("records,message", [
    ([], "no records"),
    ("abc", "records must be a list"),
    ([{"pe": 0}], "records\\[0\\] is not a Tracer.export\\(\\) record"),
    ([_record(0), _record(0)], "two records of PE 0"),
    ([_bad(pe=-2)], "has PE -2"),
    ([_bad(idle=None)], "lacks the lists idle"),
    ([_bad(offset=float("nan"))], "offset=nan"),
])
def test_bad_records_are_refused_naming_what_is_wrong(tmp_path, records, message):
    with pytest.raises(ShoalError, match=message):
        write_trace(tmp_path / "t.json", records)
    assert not os.listdir(tmp_path)


def _with_bad_events(pe: int) -> dict:
    """PE ``pe``'s record with a backward idle period, an entry whose time is inf, one whose
    name index is out of range, a send cut short and a mark whose args are not a dict."""
    rec = _record(pe)
    rec["idle"] = [*rec["idle"], (100.0052, 100.0051)]
    rec["entries"] = [*rec["entries"], (0, float("inf"), 100.001), (5, 100.001, 100.002)]
    rec["sends"] = [*rec["sends"], (100.001, 2)]
    rec["marks"] = [*rec["marks"], ("m", 100.001, 5)]
    return rec


def test_malformed_events_are_left_out_counted_and_said(tmp_path, capsys):
    good = _write(tmp_path, [_record(0), _record(1)])
    dropped = write_trace(tmp_path / "bad.json", [_with_bad_events(0), _record(1)])
    assert dropped.total == 5 and dropped.counts == {(0, "entries"): 2, (0, "idle"): 1, (0, "sends"): 1,
                                                      (0, "marks"): 1}
    assert "5 malformed events left out (entries 2, idle 1, marks 1, sends 1) on PE 0" == dropped.sentence()
    data = json.loads((tmp_path / "bad.json").read_text())
    # every good event is there, as in the trace without the bad ones
    strip = lambda evs: sorted(re.sub(" at 0x[0-9a-f]+", "", json.dumps(e, sort_keys=True)) for e in evs)  # noqa: E731
    assert strip(data["traceEvents"]) == strip(good["traceEvents"])
    said = data["otherData"]["shoal"]["dropped"]
    assert said["events"] == 5 and said["pes"] == {"0": 5} and said["kinds"]["idle"] == 1
    assert said["examples"]["idle"].startswith("PE 0: (100.0052, 100.0051): expected (t0, t1)")
    assert "dropped" not in good["otherData"]["shoal"]
    # the summary and the report say it
    assert shoal_main(["trace", "summary", str(tmp_path / "bad.json")]) == 0
    out = capsys.readouterr().out
    assert "5 malformed events were left out when the trace was written" in " ".join(out.split())
    from shoal.trace.read import read_trace

    notes = read_trace(tmp_path / "bad.json").notes
    assert any("5 malformed events were left out" in n and "idle 1" in n for n in notes), notes
    assert not read_trace(tmp_path / "trace.json").notes


def test_a_record_of_bad_events_only_keeps_its_span(tmp_path):
    rec = _bad(entries=[(0, 2.0, 1.0)], idle=[], sends=[], migrations=[], balances=[], marks=[])
    dropped = write_trace(tmp_path / "t.json", [rec])
    assert dropped.total == 1
    data = json.loads((tmp_path / "t.json").read_text())
    assert data["otherData"]["shoal"]["pes"][0]["end"] == pytest.approx(10_000.0)  # start 100 s, end 100.01 s


def test_meta_is_checked(tmp_path):
    with pytest.raises(ShoalError, match="'shoal' is reserved"):
        write_trace(tmp_path / "t.json", [_record(0)], meta={"shoal": 1})
    with pytest.raises(ShoalError, match="mapping with str keys"):
        write_trace(tmp_path / "t.json", [_record(0)], meta={1: 2})  # type: ignore[dict-item]


# -- the summary -------------------------------------------------------------------------------
def _x(name, ts, dur, tid, cat="entry"):
    return {"name": name, "cat": cat, "ph": "X", "ts": ts, "dur": dur, "pid": 7, "tid": tid}


SYNTHETIC = {"traceEvents": [
    {"name": "thread_name", "ph": "M", "pid": 7, "tid": 10, "args": {"name": "PE 0"}},
    {"name": "thread_name", "ph": "M", "pid": 7, "tid": 11, "args": {"name": "PE 1"}},
    # PE 0: 0..1000 µs; busy 100+300+200 (a 50 µs slice nested in B counts once), idle 250
    _x("A.f", 0, 100, 10), _x("idle", 100, 150, 10, "idle"), _x("B.g", 250, 300, 10), _x("C.h", 260, 50, 10),
    _x("A.f", 600, 200, 10), _x("idle", 850, 100, 10, "idle"),
    {"name": "send", "cat": "send", "ph": "i", "s": "t", "ts": 990, "pid": 7, "tid": 10},
    _x("migrate out", 950, 50, 10, "migration"),
    # PE 1: 100..600 µs; busy 400 (B.g), idle 100
    _x("B.g", 100, 400, 11), _x("idle", 500, 100, 11, "idle"), _x("balance tiles (greedy)", 120, 10, 11, "lb"),
]}


def test_summary_adds_up_busy_idle_and_other_per_pe():
    s = summarize(SYNTHETIC)
    assert [p.name for p in s.pes] == ["PE 0", "PE 1"] and [p.pe for p in s.pes] == [0, 1]
    p0, p1 = s.pes
    assert p0.span == pytest.approx(1000e-6) and p0.busy == pytest.approx(600e-6) and p0.idle == pytest.approx(250e-6)
    assert p0.other == pytest.approx(150e-6) and p0.utilization == pytest.approx(0.6)
    assert (p0.entries, p0.sends, p0.migrations, p0.balances) == (4, 1, 1, 0)
    assert p1.span == pytest.approx(500e-6) and p1.busy == pytest.approx(400e-6) and p1.idle == pytest.approx(100e-6)
    assert p1.other == pytest.approx(0) and p1.balances == 1
    assert s.span == pytest.approx(1000e-6) and s.busy == pytest.approx(1000e-6)
    assert [m.name for m in s.methods] == ["B.g", "A.f", "C.h"]  # by total time
    b, a, c = s.methods
    assert (b.count, b.total, b.mean, b.max) == (2, pytest.approx(700e-6), pytest.approx(350e-6), pytest.approx(400e-6))
    assert (a.count, a.total, a.mean) == (2, pytest.approx(300e-6), pytest.approx(150e-6))
    assert c.count == 1


def test_summary_of_a_written_trace_uses_each_pes_span(tmp_path):
    write_trace(tmp_path / "t.json", [_record(0), _record(1)])
    s = summarize(tmp_path / "t.json")
    assert [p.pe for p in s.pes] == [0, 1]
    for p in s.pes:  # from tracing's start (100.000) to export (100.010)
        assert p.span == pytest.approx(0.010) and p.busy == pytest.approx(0.007) and p.idle == pytest.approx(0.001)
        assert p.other == pytest.approx(0.002) and p.entries == 3 and p.sends == 1
    assert [(m.name, m.count) for m in s.methods] == [("Main.run", 2), ("Tile.step", 4)]
    assert s.meta["shoal"]["format"] == tracing.FORMAT


def test_load_trace_errors_name_the_file_and_the_problem(tmp_path):
    with pytest.raises(ShoalError, match=r"trace file '.*missing.json' not found"):
        load_trace(tmp_path / "missing.json")
    (tmp_path / "bad.json").write_text('{"traceEvents": [')
    with pytest.raises(ShoalError, match=r"bad.json' is not a trace: invalid JSON at line 1 .*ends early"):
        load_trace(tmp_path / "bad.json")
    (tmp_path / "other.json").write_text('{"hello": 1}')
    with pytest.raises(ShoalError, match=r"other.json' is not a trace: expected a Chrome trace-event file"):
        load_trace(tmp_path / "other.json")
    (tmp_path / "list.json").write_text('[1, 2]')
    with pytest.raises(ShoalError, match=r"traceEvents\[0\] is 1, not an event object"):
        load_trace(tmp_path / "list.json")
    (tmp_path / "bin.json").write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(ShoalError, match="is not a trace"):
        load_trace(tmp_path / "bin.json")
    (tmp_path / "events.json").write_text(json.dumps(SYNTHETIC["traceEvents"]))  # the bare-array form
    assert summarize(load_trace(tmp_path / "events.json")).pes[0].name == "PE 0"
    with pytest.raises(ShoalError, match=r"traceEvents\[0\] has ts='soon'"):
        summarize({"traceEvents": [{"ph": "X", "ts": "soon", "dur": 1}]})


def test_print_summary_with_rich_and_without(monkeypatch):
    s = summarize(SYNTHETIC)
    out = io.StringIO()
    print_summary(s, out, top=2)
    text = out.getvalue()
    assert "PE 0" in text and "PE 1" in text and "all" in text and "\x1b[" not in text  # no colours off a terminal
    assert text.index("B.g") < text.index("A.f") and "C.h" not in text and "top 2 of 3" in text
    monkeypatch.setitem(sys.modules, "rich", None)  # as if rich were not installed
    out = io.StringIO()
    print_summary(s, out)
    plain = out.getvalue()
    lines = plain.splitlines()
    assert lines[0].startswith("time per PE") and any(ln.startswith("PE 0 ") and "60.0%" in ln for ln in lines)
    assert plain.index("B.g") < plain.index("A.f") < plain.index("C.h")
    with pytest.raises(ValueError, match="at least 1"):
        print_summary(s, out, top=0)


# -- the command line --------------------------------------------------------------------------
def test_shoal_trace_summary_prints_the_tables(tmp_path, capsys):
    write_trace(tmp_path / "t.json", [_record(0), _record(1)])
    assert shoal_main(["trace", "summary", str(tmp_path / "t.json"), "--top", "1"]) == 0
    out = capsys.readouterr().out
    assert "PE 1" in out and "Main.run" in out and "Tile.step" not in out


def test_shoal_trace_summary_of_garbage_is_one_line_and_exit_2(tmp_path):
    (tmp_path / "g.json").write_text("not json at all")
    for name in ("g.json", "missing.json"):
        proc = subprocess.run([sys.executable, "-m", "shoal", "trace", "summary", str(tmp_path / name)],
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode == 2 and proc.stdout == "", proc
        assert proc.stderr.startswith("shoal trace summary: ") and proc.stderr.count("\n") == 1, proc.stderr
        assert name in proc.stderr
    proc = subprocess.run([sys.executable, "-m", "shoal", "trace", "summary", str(tmp_path / "g.json"), "--top", "0"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "--top 0 is not valid" in proc.stderr


def _run(tmp_path: Path, *argv: str) -> subprocess.CompletedProcess:
    prog = tmp_path / "p.py"
    prog.write_text("import os\nfor k in ('SHOAL_TRACE', 'SHOAL_LB', 'SHOAL_LB_PERIOD'):\n"
                    "    print(k, repr(os.environ.get(k)))\n")
    return subprocess.run([sys.executable, "-m", "shoal", "run", *argv, str(prog)], capture_output=True, text=True,
                          timeout=120, env=clean_env(), cwd=tmp_path)


def test_run_options_become_the_pes_variables(tmp_path):
    proc = _run(tmp_path, "-n", "2", "--transport", "inproc", "--trace", "out.json", "--lb", "greedy",
                "--lb-period", "3")
    assert proc.returncode == 0, proc.stderr
    assert f"SHOAL_TRACE {str(tmp_path / 'out.json')!r}" in proc.stdout  # absolute: PEs may start elsewhere
    assert "SHOAL_LB 'greedy'" in proc.stdout and "SHOAL_LB_PERIOD '3'" in proc.stdout
    proc = _run(tmp_path, "-n", "1", "--transport", "inproc")
    assert proc.returncode == 0 and "SHOAL_TRACE None" in proc.stdout and "SHOAL_LB None" in proc.stdout


@pytest.mark.parametrize("transport", ["inproc", "mpi"])
@pytest.mark.parametrize("argv,message", [
    (("--lb-period", "-2"), "shoal run: SHOAL_LB_PERIOD='-2' is not valid: SHOAL_LB_PERIOD must be from -1 to "),
    (("--lb", "no good"), "shoal run: SHOAL_LB='no good' is not valid: SHOAL_LB must be a strategy name"),
    (("--trace", "nowhere/t.json"), "shoal run: --trace "),
])
def test_bad_run_options_stop_the_job_before_it_starts(tmp_path, transport, argv, message):
    proc = _run(tmp_path, "-n", "2", "--transport", transport, *argv)
    assert proc.returncode == 2 and "SHOAL_" not in proc.stdout, proc
    assert proc.stderr.startswith(message) and proc.stderr.count("\n") == 1, proc.stderr


# -- the settings ------------------------------------------------------------------------------
def test_tracing_and_balancing_settings():
    s = load_settings(environ={})
    assert (s.trace, s.lb, s.lb_period) == ("", "", 0) == (Settings().trace, Settings().lb, Settings().lb_period)
    s = load_settings(environ={"SHOAL_TRACE": "/tmp/t.json", "SHOAL_LB": "my_lb-2.v1", "SHOAL_LB_PERIOD": "10"})
    assert (s.trace, s.lb, s.lb_period) == ("/tmp/t.json", "my_lb-2.v1", 10)
    assert load_settings(environ={}, trace="x.json", lb="greedy", lb_period=2).lb_period == 2


@pytest.mark.parametrize("var,value,why", [
    ("SHOAL_LB_PERIOD", "-2", "must be from -1 to 2147483647; a count of at_sync calls"),
    ("SHOAL_LB_PERIOD", str(2**31), "must be from -1 to"),
    ("SHOAL_LB", "9lives", "must be a strategy name"),
    ("SHOAL_LB", "a b", "must be a strategy name"),
])
def test_bad_tracing_and_balancing_settings_are_refused(var, value, why):
    with pytest.raises(SettingsError) as info:
        load_settings(environ={var: value})
    assert str(info.value).startswith(f"{var}={value!r} is not valid: {var} {why}"), str(info.value)
    with pytest.raises(SettingsError, match="SHOAL_LB_PERIOD='x' is not a valid int"):
        load_settings(environ={"SHOAL_LB_PERIOD": "x"})
    with pytest.raises(SettingsError, match="setting lb=3 must be a str"):
        load_settings(environ={}, lb=3)
