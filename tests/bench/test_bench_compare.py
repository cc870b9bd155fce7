"""``shoal bench compare`` end to end against fake micro-benchmark runners.

The trial runner is injected: most tests use :class:`MicroRunner` pointed at a tiny
fake script (the real subprocess path, JSON parsing and failure handling), some an
in-process fake that records the order it was called in.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from collections import Counter
from pathlib import Path

import pytest
from support.commands import clean_env
from support import ROOT

pytest.importorskip("scipy", reason="shoal bench compare needs scipy: pip install 'shoal[bench]'")
pytest.importorskip("rich", reason="shoal bench compare needs rich: pip install 'shoal[bench]'")
pytest.importorskip("matplotlib", reason="shoal bench compare needs matplotlib: pip install 'shoal[bench]'")

from shoal.bench import compare  # noqa: E402
from shoal.bench.compare import CompareError, MicroRunner, Target, TrialRequest, TrialResult  # noqa: E402
from shoal.bench.stats import median  # noqa: E402

TARGETS = "shoal:entry,shoal:channel,mpi4py,c"
FAST = ["--resamples", "999"]

#: prints one micro JSON record with 5% noise; slower targets are scaled up.
#: FAKE_FAIL=<target> makes that target fail; FAKE_UNIT overrides the unit.
FAKE_MICRO = textwrap.dedent(
    """
    import json, os, random, sys
    args = sys.argv[1:]
    test, target = args[0], args[args.index("--target") + 1]
    api = args[args.index("--api") + 1] if "--api" in args else None
    assert args[-1] == "--json", args
    if os.environ.get("FAKE_FAIL") == target:
        print("mpicc: cannot compile the C baseline (fake)", file=sys.stderr)
        sys.exit(3)
    if os.environ.get("FAKE_GARBAGE") == target:
        print("# OSU MPI Latency Test (not JSON)")
        sys.exit(0)
    scale = {"c": 1.0, "mpi4py": 1.25, "shoal": 2.0 if api == "entry" else 1.5, "charm4py": 9.0}[target]
    unit = os.environ.get("FAKE_UNIT_" + target, "us")
    rows = [{"size": s, "value": scale * (1 + s / 1024) * random.uniform(0.95, 1.05), "iterations": 10}
            for s in (1, 8, 1024)]
    print("some chatter before the record")
    print(json.dumps({"test": test, "target": target, "api": api, "buffer": "bytearray",
                      "pes": 2, "unit": unit, "rows": rows}))
    """
)


@pytest.fixture
def fake_runner(tmp_path: Path) -> MicroRunner:
    script = tmp_path / "fake_micro.py"
    script.write_text(FAKE_MICRO)
    return MicroRunner([sys.executable, str(script)], timeout=60)


class RecordingRunner:
    """In-process fake: deterministic values, and the order of the calls."""

    def __init__(self, values: dict[str, float]):
        self.values = values
        self.calls: list[str] = []

    def __call__(self, request: TrialRequest) -> TrialResult:
        label = request.target.label
        self.calls.append(label)
        k = len(self.calls)
        value = self.values[label] * (1 + 0.01 * (k % 5))  # a little spread, no ties
        rows = (compare.Row(8, value, 100), compare.Row(1 << 20, value * 100, 10))
        return TrialResult(request.test, request.target.name, request.target.api, "bytearray", 2, "us", rows)


def run(argv: list[str], runner) -> int:
    return compare.main(argv, runner=runner)


# ------------------------------------------------------------------ targets and order


def test_parse_targets() -> None:
    assert compare.parse_targets("shoal:entry, mpi4py,c") == [Target("shoal", "entry"), Target("mpi4py"), Target("c")]
    assert [t.label for t in compare.parse_targets(TARGETS)] == TARGETS.split(",")
    assert compare.parse_targets("mpi4py:pickle,mpi4py:buffer")[0] == Target("mpi4py", "pickle")


@pytest.mark.parametrize("spec", ["shoal:entry,dask", "shoal:rpc,mpi4py", "c:openmp,mpi4py", "c"])
def test_unknown_or_too_few_targets_list_the_valid_ones(spec: str) -> None:
    with pytest.raises(CompareError) as info:
        compare.parse_targets(spec)
    assert "shoal:entry" in str(info.value) and "shoal:channel" in str(info.value) and "charm4py" in str(info.value)


def test_repeated_target_is_rejected() -> None:
    with pytest.raises(CompareError, match="listed twice"):
        compare.parse_targets("mpi4py,c,mpi4py")


def test_schedule_is_a_fresh_seeded_shuffle_each_round() -> None:
    targets = compare.parse_targets(TARGETS)
    plan = compare.schedule(targets, 40, seed=3)
    assert len(plan) == 40
    assert all(sorted(t.label for t in r) == sorted(t.label for t in targets) for r in plan)  # balanced
    assert len({tuple(r) for r in plan}) > 10  # randomized: many distinct orders of the 24 possible
    firsts = Counter(r[0].label for r in plan)
    assert set(firsts) == {t.label for t in targets}  # every target sometimes runs first
    assert plan == compare.schedule(targets, 40, seed=3)  # reproducible
    assert plan != compare.schedule(targets, 40, seed=4)


def test_trials_run_in_the_recorded_interleaved_order(tmp_path: Path) -> None:
    runner = RecordingRunner({"shoal:entry": 2.0, "shoal:channel": 1.5, "mpi4py": 1.25, "c": 1.0})
    argv = ["latency", "--targets", TARGETS, "--trials", "6", "--seed", "11", "--out", str(tmp_path), "--no-plot", *FAST]
    assert run(argv, runner) == 0
    doc = json.loads((tmp_path / "compare.json").read_text())
    assert doc["order"] == compare.ORDER and doc["seed"] == 11
    assert [label for rnd in doc["rounds"] for label in rnd] == runner.calls
    assert Counter(runner.calls) == {label: 6 for label in TARGETS.split(",")}
    for i, rnd in enumerate(doc["rounds"]):
        assert sorted(rnd) == sorted(TARGETS.split(","))
        assert runner.calls[4 * i: 4 * i + 4] == rnd
    assert len({tuple(r) for r in doc["rounds"]}) > 1
    assert [r["target"] for r in doc["runs"]] == runner.calls


# ------------------------------------------------------------------ end to end


def test_compare_writes_json_png_and_a_table(tmp_path: Path, fake_runner: MicroRunner, capsys) -> None:
    out = tmp_path / "results" / "cmp"
    argv = ["latency", "--targets", TARGETS, "--baseline", "mpi4py", "--trials", "4", "--seed", "5",
            "-m", "1:1024", "--quick", "--out", str(out), *FAST]
    assert run(argv, fake_runner) == 0
    printed = capsys.readouterr().out

    doc = json.loads((out / "compare.json").read_text())
    assert doc["schema"] == compare.SCHEMA
    assert (doc["test"], doc["unit"], doc["lower_is_better"], doc["pes"]) == ("latency", "us", True, 2)
    assert doc["targets"] == TARGETS.split(",") and doc["baseline"] == "mpi4py" and doc["trials"] == 4
    assert doc["micro_options"] == ["-m", "1:1024", "--quick"]
    assert len(doc["samples"]) == 4 * 4 * 3  # rounds x targets x sizes
    assert len(doc["summary"]) == 4 * 3
    assert doc["command"][:4] == ["shoal", "bench", "compare", "latency"]

    png = out / "compare.png"
    assert png.stat().st_size > 10_000
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    for size in ("1 B", "8 B", "1 KiB"):
        assert f"size {size}" in printed
    assert "÷ mpi4py" in printed and "95% CI" in printed and "p faster" in printed
    assert f"wrote {out / 'compare.json'}" in printed


def test_ratio_column_is_median_over_baseline_median(tmp_path: Path, fake_runner: MicroRunner, capsys) -> None:
    argv = ["latency", "--targets", TARGETS, "--trials", "5", "--seed", "1", "--out", str(tmp_path), "--no-plot", *FAST]
    assert run(argv, fake_runner) == 0
    printed = capsys.readouterr().out
    doc = json.loads((tmp_path / "compare.json").read_text())
    assert not (tmp_path / "compare.png").exists()

    def values(target: str, size: int) -> list[float]:
        return [s["value"] for s in doc["samples"] if s["target"] == target and s["size"] == size]

    for s in doc["summary"]:
        assert s["n"] == 5
        assert s["median"] == pytest.approx(median(values(s["target"], s["size"])))
        assert s["ci"][0] <= s["median"] <= s["ci"][1]
        if s["target"] == "mpi4py":
            assert s["ratio"] is None and s["p_differs"] is None
            continue
        expected = median(values(s["target"], s["size"])) / median(values("mpi4py", s["size"]))
        assert s["ratio"] == pytest.approx(expected)
        assert s["ratio_ci"][0] <= s["ratio"] <= s["ratio_ci"][1]
        assert f"{expected:.2f}x" in printed
    # the fake's scales: shoal:entry is 2.0 / 1.25 = 1.6x mpi4py, c is 0.8x, each clearly separated
    entry8 = next(s for s in doc["summary"] if s["target"] == "shoal:entry" and s["size"] == 8)
    c8 = next(s for s in doc["summary"] if s["target"] == "c" and s["size"] == 8)
    assert 1.4 < entry8["ratio"] < 1.8 and entry8["p_faster"] > 0.9 and entry8["p_differs"] < 0.05
    assert 0.7 < c8["ratio"] < 0.9 and c8["p_faster"] < 0.05


def test_rows_follow_command_line_order(tmp_path: Path) -> None:
    runner = RecordingRunner({"shoal:entry": 2.0, "mpi4py": 1.25, "c": 1.0})
    argv = ["latency", "--targets", "c,shoal:entry,mpi4py", "--trials", "3", "--seed", "2",
            "--out", str(tmp_path), "--no-plot", *FAST]
    assert run(argv, runner) == 0
    doc = json.loads((tmp_path / "compare.json").read_text())
    assert [s["target"] for s in doc["summary"] if s["size"] == 8] == ["c", "shoal:entry", "mpi4py"]


def test_default_baseline_is_mpi4py_else_the_first(tmp_path: Path) -> None:
    runner = RecordingRunner({"shoal:entry": 2.0, "shoal:channel": 1.5, "mpi4py": 1.25, "c": 1.0})
    for targets, expected in (("c,mpi4py", "mpi4py"), ("shoal:channel,shoal:entry", "shoal:channel")):
        out = tmp_path / expected
        assert run(["latency", "--targets", targets, "--trials", "2", "--out", str(out), "--no-plot", *FAST], runner) == 0
        doc = json.loads((out / "compare.json").read_text())
        assert doc["baseline"] == expected
        assert any("smallest possible two-sided p is 0.333" in note for note in doc["notes"])


def test_bandwidth_higher_is_better(tmp_path: Path, fake_runner: MicroRunner, monkeypatch) -> None:
    for target in ("c", "mpi4py"):
        monkeypatch.setenv(f"FAKE_UNIT_{target}", "MB/s")
    argv = ["bw", "--targets", "c,mpi4py", "--trials", "4", "--seed", "2", "--out", str(tmp_path), *FAST]
    assert run(argv, fake_runner) == 0
    doc = json.loads((tmp_path / "compare.json").read_text())
    assert doc["unit"] == "MB/s" and doc["lower_is_better"] is False
    c = next(s for s in doc["summary"] if s["target"] == "c" and s["size"] == 8)
    assert c["ratio"] < 1 and c["p_faster"] > 0.9  # fewer MB/s than mpi4py: not faster
    assert (tmp_path / "compare.png").stat().st_size > 10_000


# ------------------------------------------------------------------ failures


def test_failing_target_stops_with_its_stderr(tmp_path: Path, fake_runner: MicroRunner, capsys, monkeypatch) -> None:
    monkeypatch.setenv("FAKE_FAIL", "c")
    argv = ["latency", "--targets", TARGETS, "--trials", "3", "--seed", "1", "--out", str(tmp_path / "r"), *FAST]
    assert run(argv, fake_runner) == 1
    err = capsys.readouterr().err
    assert "target c failed: exit status 3" in err
    assert "mpicc: cannot compile the C baseline (fake)" in err
    assert "--target c" in err  # the command that failed
    assert not (tmp_path / "r").exists()


def test_target_printing_no_json_is_reported(tmp_path: Path, fake_runner: MicroRunner, capsys, monkeypatch) -> None:
    monkeypatch.setenv("FAKE_GARBAGE", "mpi4py")
    argv = ["latency", "--targets", "c,mpi4py", "--trials", "2", "--out", str(tmp_path), *FAST]
    assert run(argv, fake_runner) == 1
    err = capsys.readouterr().err
    assert "target mpi4py failed: printed no JSON" in err and "OSU MPI Latency Test" in err


def test_targets_disagreeing_on_unit_is_an_error(tmp_path: Path, fake_runner: MicroRunner, capsys, monkeypatch) -> None:
    monkeypatch.setenv("FAKE_UNIT_c", "MB/s")
    argv = ["latency", "--targets", "c,mpi4py", "--trials", "2", "--out", str(tmp_path), *FAST]
    assert run(argv, fake_runner) == 2
    assert "trials disagree on unit" in capsys.readouterr().err


def test_micro_answering_another_target_is_an_error(tmp_path: Path, capsys) -> None:
    def confused(request: TrialRequest) -> TrialResult:
        return TrialResult(request.test, "mpi4py", None, "bytearray", 2, "us", (compare.Row(8, 1.0, 1),))

    assert run(["latency", "--targets", "shoal:channel,mpi4py", "--trials", "2", "--seed", "0",
                "--out", str(tmp_path)], confused) == 2
    assert "it reported latency on mpi4py" in capsys.readouterr().err


def test_trial_timeout_is_a_failure(tmp_path: Path, capsys) -> None:
    script = tmp_path / "hang.py"
    script.write_text("import time; time.sleep(30)\n")
    runner = MicroRunner([sys.executable, str(script)], timeout=0.5)
    assert run(["latency", "--targets", "c,mpi4py", "--trials", "2", "--out", str(tmp_path / "r")], runner) == 1
    assert "timed out after 0.5 s" in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv, message",
    [
        (["latency", "--targets", "shoal:entry,dask"], "unknown target 'dask'; valid targets: shoal, shoal:entry"),
        (["latency", "--targets", "c,mpi4py", "--baseline", "charm4py"], "--baseline 'charm4py' is not one of"),
        (["latency", "--targets", "c,mpi4py", "--trials", "1"], "--trials must be at least 2"),
    ],
)
def test_bad_arguments_are_explained(argv: list[str], message: str, capsys) -> None:
    def never(request: TrialRequest) -> TrialResult:
        raise AssertionError("no trial should run")

    assert run(argv, never) == 2
    assert message in capsys.readouterr().err


def test_unknown_option_lists_valid_ones(capsys) -> None:
    with pytest.raises(SystemExit) as info:
        compare.main(["latency", "--targets", "c,mpi4py", "--rounds", "3"])
    assert info.value.code == 2
    assert "valid options:" in capsys.readouterr().err


def test_micro_options_and_passthrough_reach_every_trial() -> None:
    runner = MicroRunner(["micro"])
    request = TrialRequest("bw", Target("shoal", "channel"), ("-n", "2", "--quick", "--buffer", "numpy"))
    assert runner.argv(request) == [
        "micro", "bw", "--target", "shoal", "--api", "channel", "-n", "2", "--quick", "--buffer", "numpy", "--json",
    ]


def test_registered_as_a_shoal_bench_subcommand() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "shoal", "bench", "compare", "--help"],
        capture_output=True, text=True, timeout=60, cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr
    assert "--targets" in proc.stdout and "--baseline" in proc.stdout


# ------------------------------------------------------------------ a real run


def _micro_quick_works() -> bool:
    from importlib.util import find_spec

    modules = ("shoal.bench.micro", "shoal.bench.micro.cli", "shoal.bench.micro.shoal_target",
               "shoal.bench.micro.mpi4py_target")
    return all(find_spec(m) is not None for m in modules)


@pytest.mark.mpi
@pytest.mark.skipif(not _micro_quick_works(), reason="`shoal bench micro` is not available yet")
def test_real_tiny_compare(tmp_path: Path) -> None:
    env = clean_env()
    proc = subprocess.run(
        [sys.executable, "-m", "shoal", "bench", "compare", "latency", "--quick", "--trials", "2",
         "--targets", "shoal:entry,mpi4py", "--seed", "1", "--out", str(tmp_path), "--no-plot", *FAST],
        capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    doc = json.loads((tmp_path / "compare.json").read_text())
    assert doc["unit"] == "us" and doc["targets"] == ["shoal:entry", "mpi4py"]
    assert all(s["median"] > 0 for s in doc["summary"])


def test_collectives_grid_and_table_from_compare_documents(tmp_path):
    """shoal bench collectives --report-only: one panel per test, ratios at fixed sizes."""
    from shoal.bench.compare import collectives

    def doc(sizes, ratio):  # type: ignore[no-untyped-def]
        summary = []
        for size in sizes:
            summary.append({"target": "mpi4py", "size": size, "median": 1.0, "ratio": None, "ratio_ci": None})
            summary.append({"target": "shoal", "size": size, "median": ratio, "ratio": ratio,
                            "ratio_ci": [ratio * 0.9, ratio * 1.1]})
        return {"summary": summary}

    for test, sizes, ratio in (("allreduce", [8, 1024, 65536], 2.0), ("barrier", [0], 1.5)):
        (tmp_path / test).mkdir()
        (tmp_path / test / "compare.json").write_text(json.dumps(doc(sizes, ratio)))
    assert collectives.main(["--tests", "allreduce,barrier", "--out", str(tmp_path), "--report-only"]) == 0
    assert (tmp_path / "collectives.png").stat().st_size > 10_000
    lines = collectives.table({t: json.loads((tmp_path / t / "compare.json").read_text()) for t in ("allreduce", "barrier")},
                              "mpi4py")
    assert lines[2] == "| allreduce (shoal) | 2.00 [1.80, 2.20] | 2.00 [1.80, 2.20] | 2.00 [1.80, 2.20] |  |  |"
    assert lines[3].startswith("| barrier (shoal) | 1.50 [1.35, 1.65] |")
    assert collectives.main(["--tests", "gather", "--out", str(tmp_path), "--report-only"]) == 2
