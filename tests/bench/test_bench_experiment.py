"""Experiment files, resumable CSV results and `shoal bench report` (shoal.bench.evaluation).

The runs use jacobi2d's sequential target on tiny grids (about 1 s a process); the
rest is pure or works on hand-written files.
"""

from __future__ import annotations

import csv
import json
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from support import EXAMPLES
from support.browser import chromium, rendered

pytest.importorskip("scipy", reason="benchmark statistics need scipy: pip install 'shoal[bench]'")
pytest.importorskip("matplotlib", reason="report figures need matplotlib: pip install 'shoal[bench]'")

from scipy import stats as scipy_stats  # noqa: E402

from shoal.bench import stats  # noqa: E402
from shoal.bench.evaluation import analysis, results, runner, spec  # noqa: E402
from shoal.bench.evaluation.report import main as report_main  # noqa: E402
from shoal.bench.experiment import main as experiment_main  # noqa: E402

GRID = {"app": "jacobi2d", "targets": ["sequential", "shoal", "odf2"], "pes": [1, 2], "size": [16, 24],
        "steps": 2, "trials": 3, "seed": 11, "target": {"odf2": {"target": "shoal", "odf": 2}}}

TINY = """\
app = "jacobi2d"
targets = ["sequential"]
pes = 1
size = [16, 20, 24]
steps = 2
trials = 2
warmup = 0
seed = 5
"""


def csv_rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


# ------------------------------------------------------------------ the grid


def test_grid_expands_every_configuration_target_and_trial() -> None:
    exp = spec.parse(GRID)
    runs = spec.plan(exp, seed=11)
    # 2 pes x 2 sizes x 3 targets, less sequential on 2 PEs = 10 cells; 3 trials each
    assert len(runs) == 30
    assert [r.order for r in runs] == list(range(30))
    assert not any(r.target.app_target == "sequential" and r.pes != 1 for r in runs)
    assert Counter(r.cell for r in runs) == Counter({cell: 3 for cell in {r.cell for r in runs}})
    assert len({r.key for r in runs}) == 30
    for trial in range(3):  # each round holds every cell once, in rounds of trial order
        assert [r.trial for r in runs[trial * 10:(trial + 1) * 10]] == [trial] * 10
    odf2 = next(r for r in runs if r.target.name == "odf2" and r.pes == 2 and r.options == (("size", 24), ("steps", 2)))
    assert odf2.argv() == ["app", "jacobi2d", "--target", "shoal", "-n", "2", "--size", "24", "--steps", "2",
                           "--odf", "2"]
    assert odf2.configuration == "size=24 steps=2"


def test_run_order_is_random_and_reproducible_from_its_seed() -> None:
    exp = spec.parse(GRID)
    keys = lambda seed: [r.key for r in spec.plan(exp, seed)]  # noqa: E731
    assert keys(11) == keys(11)
    assert keys(11) != keys(12)
    assert sorted(keys(11)) == sorted(keys(12))
    grid_order = [r.cell for r in spec.plan(exp, 11)][:10]
    assert grid_order != sorted(grid_order)  # shuffled (for this seed)


# ------------------------------------------------------------------ running and resuming


def test_rows_flag_oversubscription_and_widen_for_new_fields(tmp_path: Path) -> None:
    cores = runner.available_cores()
    exp = spec.parse({**GRID, "targets": ["shoal"], "target": {}, "pes": [1, cores + 1], "size": 16, "trials": 2,
                      "warmup": 0})
    calls: list[list[str]] = []

    def fake(cmd: list[str], metric: str, timeout: float) -> dict:
        calls.append(cmd)
        pes = int(cmd[cmd.index("-n") + 1])
        extra = {"extra_field": 1.5} if len(calls) > 2 else {}
        return {"time_per_step": 0.001 * pes, "compute_per_step": 0.0008, "comm_per_step": 0.0002 * pes,
                "checksum": 1.25, "verified": True, "shape": [16, 16], "kernels": "numba", **extra}

    out = tmp_path / "r.csv"
    assert runner.execute(exp, out, runner=fake, log=lambda _: None) == 0
    rows = csv_rows(out)
    assert len(rows) == 4 == len(calls)
    assert {r["oversubscribed"] for r in rows if r["pes"] == "1"} == {"0"}
    assert {r["oversubscribed"] for r in rows if r["pes"] == str(cores + 1)} == {"1"}
    assert "extra_field" in rows[0] and "shape" not in rows[0] and "kernels" not in rows[0]
    assert {r["verified"] for r in rows} == {"1"} and {r["seed"] for r in rows} == {"11"}
    assert list(rows[0])[-1] == "command" and "--json" in rows[0]["command"]
    assert (tmp_path / "r.csv.machine.json").exists()


def test_resume_after_a_kill_runs_each_trial_once(tmp_path: Path) -> None:
    toml = tmp_path / "tiny.toml"
    toml.write_text(TINY)
    out = tmp_path / "tiny.csv"
    cmd = [sys.executable, "-m", "shoal", "bench", "experiment", str(toml), "--out", str(out)]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and (not out.exists() or len(out.read_text().splitlines()) < 2):
            time.sleep(0.05)
        proc.terminate()
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    written = csv_rows(out)
    assert 1 <= len(written) < 6, "the kill came after every trial: nothing left to resume"
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert f"{len(written)} already in" in done.stdout
    rows = csv_rows(out)
    keys = [results.row_key(r) for r in rows]
    assert len(keys) == len(set(keys)) == 6
    assert rows[:len(written)] == written
    planned = spec.plan(spec.load(toml), 5)
    assert [int(r["order"]) for r in rows] == [r.order for r in planned]  # the seeded order, continued
    assert [results.row_key(r) for r in rows] == [r.key for r in planned]
    assert {r["checksum"] for r in rows if r["configuration"] == "size=16 steps=2"} != set()
    again = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert again.returncode == 0 and "nothing left to run" in again.stdout
    assert len(csv_rows(out)) == 6


# ------------------------------------------------------------------ statistics against SciPy

FIXED = {"a": [1.0, 1.2, 0.9, 1.1, 1.05], "b": [2.0, 2.1, 1.9, 2.3, 2.05]}


def fixed_cells() -> list[analysis.Cell]:
    return [analysis.Cell("jacobi2d", "size=64 steps=10", 1, "a", False, tuple(FIXED["a"]), baseline="b"),
            analysis.Cell("jacobi2d", "size=64 steps=10", 1, "b", False, tuple(FIXED["b"]), baseline="b"),
            analysis.Cell("jacobi2d", "size=64 steps=10", 2, "a", False, (0.6, 0.55, 0.65), baseline="b"),
            analysis.Cell("jacobi2d", "size=64x128 steps=10", 2, "a", False, (1.25, 1.3, 1.2), baseline="b")]


def test_statistics_agree_with_scipy() -> None:
    cells = fixed_cells()
    d = {(x.cell.target, x.cell.pes, x.cell.configuration): x for x in analysis.describe(cells, n_resamples=999)}
    a = d[("a", 1, "size=64 steps=10")]
    assert a.median == np.median(FIXED["a"]) and a.mean == pytest.approx(np.mean(FIXED["a"]))
    assert a.median_ci == stats.median_ci(FIXED["a"], confidence=0.99, n_resamples=999)
    ref = scipy_stats.bootstrap((np.array(FIXED["a"]),), np.mean, n_resamples=999, confidence_level=0.99,
                                method="percentile", rng=np.random.default_rng(0))
    assert a.mean_ci is not None
    assert a.mean_ci.low == pytest.approx(ref.confidence_interval.low)
    assert a.mean_ci.high == pytest.approx(ref.confidence_interval.high)
    assert a.ratio == pytest.approx(np.median(FIXED["a"]) / np.median(FIXED["b"]))
    assert d[("b", 1, "size=64 steps=10")].ratio is None  # the baseline itself
    (pair,) = [p for p in analysis.pairwise(cells) if p.pes == 1]
    assert pair.pvalue == pytest.approx(scipy_stats.mannwhitneyu(FIXED["a"], FIXED["b"]).pvalue)


def test_scaling_tables_on_fixed_data() -> None:
    strong = analysis.strong_scaling(fixed_cells(), n_resamples=999)
    assert [(r.cell.pes, r.efficiency) for r in strong] == [
        (1, 1.0), (2, pytest.approx(1 * np.median(FIXED["a"]) / (2 * 0.6)))]
    weak = analysis.weak_scaling(fixed_cells(), n_resamples=999)  # 64x64 on 1 PE, 64x128 on 2
    assert [(r.cell.pes, r.cell.configuration) for r in weak] == [(1, "size=64 steps=10"), (2, "size=64x128 steps=10")]
    assert weak[1].efficiency == pytest.approx(np.median(FIXED["a"]) / 1.25)
    assert analysis.points("jacobi3d", "8") == 512 and analysis.points("jacobi2d", "8x4") == 32


# ------------------------------------------------------------------ the report

HEADER = ["order", "trial", "target", "app", "pes", "configuration", "oversubscribed", "cores", "seed", "metric",
          "baseline", "size", "steps", "time_per_step", "compute_per_step", "comm_per_step", "checksum", "command"]


def write_results(path: Path) -> None:
    rng = np.random.default_rng(3)
    rows = []
    n = 0
    for size, pes in (("64", 1), ("64", 2), ("64x128", 2), ("64", 4)):
        for target, base in (("mpi4py", 1.0), ("shoal", 1.05)):
            for trial in range(4):
                t = base * (1.0 if size == "64" else 2.0) / pes * (1 + 0.02 * rng.random()) * 1e-3
                cmd = f"python -m shoal bench app jacobi2d --target {target} -n {pes} --size {size} --steps 10 --json"
                rows.append([n, trial, target, "jacobi2d", pes, f"size={size} steps=10", int(pes > 2), 2, 7,
                             "time_per_step", "mpi4py", size, 10, t, 0.8 * t, 0.2 * t, 123.5, cmd])
                n += 1
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(HEADER)
        w.writerows(rows)


def test_report_writes_figures_and_a_self_contained_html(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    src = tmp_path / "hand.csv"
    write_results(src)
    assert report_main([str(src), "-o", str(tmp_path / "rep")]) == 0
    pngs = sorted((tmp_path / "rep").glob("*.png"))
    assert len(pngs) == 2  # size=64 and size=64x128
    for png in pngs:
        data = png.read_bytes()
        assert data.startswith(b"\x89PNG") and len(data) > 5000
    html = (tmp_path / "rep" / "report.html").read_text()
    for part in ('<table class="summary">', '<table class="pairs">', '<table class="strong">', '<table class="weak">',
                 "parallel efficiency", "data:image/png;base64,", "over-subscribed: not performance",
                 "Not drawn: pes 4", "--target shoal -n 2 --size 64x128", "numpy", "Machine"):
        assert part in html, part
    assert html.count("<img ") == 2 and "src='http" not in html
    assert "size=64 steps=10 pes=4 shoal" in capsys.readouterr().out


def test_report_in_a_headless_browser(tmp_path: Path) -> None:
    chromium()
    src = tmp_path / "hand.csv"
    write_results(src)
    assert report_main([str(src), "-o", str(tmp_path / "rep")]) == 0
    dom = rendered(tmp_path / "rep" / "report.html")
    assert "Strong scaling" in dom and dom.count("<img") == 2


# ------------------------------------------------------------------ bad input


@pytest.mark.parametrize("text, message", [
    ('app = "nbody"\ntargets = ["shoal"]\npes = 1\ntrials = 2\n', "unknown app 'nbody'; apps: pic, jacobi2d"),
    ('app = "jacobi2d"\npes = 1\n', "missing keys targets, trials"),
    ('app = "jacobi2d"\ntargets = ["shoal"]\npes = 1\ntrials = 2\nsizes = [4]\n', "unknown key 'sizes'"),
    ('app = "jacobi2d"\ntargets = ["fast"]\npes = 1\ntrials = 2\n', "target 'fast' is not a target of app"),
    ('app = "jacobi2d"\ntargets = ["shoal"]\npes = 1\ntrials = 2\nbaseline = "mpi4py"\n', "baseline = 'mpi4py'"),
    ('app = "jacobi2d"\ntargets = ["shoal"]\npes = 0\ntrials = 2\n', "pes: give a whole number ≥ 1"),
    ('app = "jacobi2d\n', "not valid TOML"),
    ('bench = "osu"\napp = "latency"\ntargets = ["shoal"]\npes = 2\ntrials = 2\n', "bench = 'osu'"),
    ('bench = "micro"\napp = "lat"\ntargets = ["shoal"]\npes = 2\ntrials = 2\n', "unknown micro-benchmark test 'lat'"),
    ('bench = "micro"\napp = "latency"\ntargets = ["dask"]\npes = 2\ntrials = 2\n', "target 'dask' is not a target"),
    ('bench = "micro"\napp = "latency"\ntargets = ["shoal"]\npes = 2\ntrials = 2\nsteps = 5\n',
     "unknown key 'steps'"),
    ('bench = "taskbench"\napp = "stencil"\ntargets = ["shoal"]\npes = 2\ntrials = 2\n',
     "unknown Task Bench dependence pattern 'stencil'"),
    ('bench = "taskbench"\napp = "stencil_1d"\ntargets = ["mpi"]\npes = 2\ntrials = 2\n',
     "target 'mpi' is not a target of METG sweep"),
    ('bench = "taskbench"\napp = "stencil_1d"\ntargets = ["shoal"]\npes = 2\ntrials = 2\nsystems = "ray"\n',
     "unknown key 'systems'"),
    ('bench = "taskbench"\napp = "stencil_1d"\ntargets = ["shoal"]\npes = 2\ntrials = 2\npool = "max"\n',
     "'max' is not one of"),
    ('bench = "stencil"\napp = "jacobi2d"\ntargets = ["c"]\npes = 1\ntrials = 2\n',
     "unknown stencil problem 'jacobi2d'; problems: jacobi, burgers, laplace3d"),
    ('bench = "stencil"\napp = "jacobi"\ntargets = ["fortran"]\npes = 1\ntrials = 2\n',
     "target 'fortran' is not a target of stencil problem 'jacobi': numpy, c, c-omp, numba, shoal"),
    ('bench = "stencil"\napp = "jacobi"\ntargets = ["c"]\npes = 1\ntrials = 2\nthreads = 4\n',
     "unknown key 'threads'"),
])
def test_bad_experiment_files_exit_2_naming_the_problem(tmp_path: Path, capsys: pytest.CaptureFixture,
                                                        text: str, message: str) -> None:
    toml = tmp_path / "bad.toml"
    toml.write_text(text)
    assert experiment_main([str(toml), "--out", str(tmp_path / "r.csv")]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "r.csv").exists()


def test_results_file_with_missing_columns_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    src = tmp_path / "short.csv"
    src.write_text("app,target,trial,time_per_step\njacobi2d,shoal,0,0.1\n")
    assert report_main([str(src)]) == 2
    err = capsys.readouterr().err
    assert "missing columns pes, configuration" in err
    assert report_main([str(tmp_path / "absent.csv")]) == 2
    bad = tmp_path / "bad.csv"
    write_results(bad)
    bad.write_text(bad.read_text().replace("123.5", "123.5").replace(",time_per_step,mpi4py,64,10,", ",time_per_step,mpi4py,64,10,x", 1))
    assert report_main([str(bad)]) == 2
    assert "is not a number" in capsys.readouterr().err


def test_variant_form_still_parses(capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit) as exc:
        experiment_main(["--variant", "a=app pic", "--variant", "a=app pic"])
    assert exc.value.code == 2 and "variant names must differ" in capsys.readouterr().err


def test_variant_form_runs_and_writes_its_samples(tmp_path: Path) -> None:
    out = tmp_path / "variants.json"
    cmd = [sys.executable, "-m", "shoal", "bench", "experiment", "--trials", "3", "--warmup", "0",
           "--metric", "time_per_step", "--baseline", "a",
           "--variant", "a=app jacobi2d --target sequential --size 32 --steps 3",
           "--variant", "b=app jacobi2d --target sequential --size 32 --steps 4", "--out", str(out)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(out.read_text())
    assert data["baseline"] == "a" and set(data["variants"]) == {"a", "b"}
    assert "ratio" in proc.stdout


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("experiment_*.*ml")),
                         ids=lambda p: p.name)
def test_example_experiment_files_are_valid(path: Path) -> None:
    """Each experiment file in examples/ loads and plans runs for every grid cell."""
    from shoal.bench.evaluation import spec

    exp = spec.load(path)
    runs = spec.plan(exp, seed=1)
    cells = [(pes, t) for pes, _ in spec.configurations(exp) for t in exp.targets
             if t.app_target != "sequential" or pes == 1]  # sequential runs on 1 PE only
    assert len(runs) == len(cells) * exp.trials > 0


def test_a_micro_benchmark_runs_as_an_experiment(tmp_path: Path) -> None:
    """bench = "micro": each run is one `shoal bench micro` job at one message size; its
    value (µs) is the metric, and the report names the unit."""
    toml = tmp_path / "lat.toml"
    toml.write_text(
        'bench = "micro"\napp = "latency"\ntargets = ["mpi4py", "shoal"]\npes = 2\n'
        'message_size = "8:8"\niterations = 50\nwarmup = 0\ntrials = 2\nseed = 1\n'
    )
    out = tmp_path / "lat.csv"
    assert experiment_main([str(toml), "--out", str(out)]) == 0
    rows = csv_rows(out)
    assert len(rows) == 4 and {r["target"] for r in rows} == {"mpi4py", "shoal"}
    assert {r["bench"] for r in rows} == {"micro"} and {r["unit"] for r in rows} == {"us"}
    assert {r["size"] for r in rows} == {"8"} and all(0 < float(r["value"]) < 1000 for r in rows)
    assert "bench micro latency --target" in rows[0]["command"] and "--message-size 8:8" in rows[0]["command"]
    assert report_main([str(out), "-o", str(tmp_path / "rep")]) == 0
    assert "median (us)" in (tmp_path / "rep" / "report.html").read_text()


def test_a_micro_run_of_several_sizes_is_refused() -> None:
    with pytest.raises(ValueError, match="one message size"):
        runner.one_row({"test": "latency", "rows": [{"size": 8, "value": 1.0}, {"size": 16, "value": 1.1}]})
    assert runner.one_row({"test": "bw", "unit": "MB/s", "rows": [{"size": 8, "value": 3.0}]}) == {
        "test": "bw", "unit": "MB/s", "size": 8, "value": 3.0}


# ------------------------------------------------------------------ METG and stencil experiments

METG = """\
bench = "taskbench"
app = "stencil_1d"
targets = ["mpi4py", "shoal-channel"]
pes = 2
steps = 10
iter_max = 16384
iter_min = 256
repeats = 1
peak = 1e6  # far below the machine's: every point is efficient, so METG is a number even on a busy machine
trials = 2
warmup = 0
seed = 1

[target.shoal-channel]
target = "shoal:channel"
"""

STENCIL = """\
bench = "stencil"
app = "jacobi"
targets = ["c", "shoal"]
pes = [1, 2]
n = 64
steps = 3
trials = 2
warmup = 0
seed = 1
"""


def test_metg_and_stencil_experiments_plan_their_commands(tmp_path: Path) -> None:
    """Each run is one system of `shoal bench metg` / `shoal bench stencil`, its last line JSON."""
    exp = spec.parse(__import__("tomllib").loads(METG), "metg.toml")
    assert exp.bench == "taskbench" and exp.metric == "metg_us"
    runs = spec.plan(exp, seed=1)
    assert len(runs) == 4 and {r.target.name for r in runs} == {"mpi4py", "shoal-channel"}
    channel = next(r for r in runs if r.target.name == "shoal-channel")
    assert spec.command(channel)[3:] == ["bench", "metg", "-type", "stencil_1d", "--systems", "shoal:channel",
                                         "-n", "2", "--iter-max", "16384", "--iter-min", "256", "--peak", "1000000.0",
                                         "--repeats", "1", "-steps", "10", "--json"]
    exp = spec.parse(__import__("tomllib").loads(STENCIL), "stencil.toml")
    assert exp.bench == "stencil" and exp.metric == "time_per_step"
    runs = spec.plan(exp, seed=1)
    assert len(runs) == 2 * 2 * 2
    shoal2 = next(r for r in runs if r.target.name == "shoal" and r.pes == 2)
    assert spec.command(shoal2)[3:] == ["bench", "stencil", "--problems", "jacobi", "--systems", "shoal-2pe",
                                        "--pes", "2", "--threads", "2", "--trials", "1", "--n", "64", "--steps", "3",
                                        "--json", "-"]


def test_stencil_targets_name_the_stencil_benchmarks_systems() -> None:
    from shoal.bench.stencil.cli import systems

    for pes in (1, 3):
        names = {name for name, _ in systems("jacobi", 64, 3, [pes], 1, pes, True)}
        assert {form.format(pes=pes) for form in spec.STENCIL_SYSTEMS.values()} == names


def _tiny_experiment(tmp_path: Path, text: str) -> tuple[list[dict[str, str]], Path]:
    toml = tmp_path / "exp.toml"
    toml.write_text(text)
    out = tmp_path / "exp.csv"
    assert experiment_main([str(toml), "--out", str(out)]) == 0
    return csv_rows(out), out


@pytest.mark.mpi
def test_a_metg_sweep_runs_as_an_experiment(tmp_path: Path) -> None:
    """bench = "taskbench": a row per system and trial, METG in µs, and the report says µs.
    (The sweep's plumbing, not a measurement: the given peak makes every point efficient.)"""
    from shoal.bench.taskbench import kernels

    try:
        kernels.library()
    except kernels.NativeError:  # pragma: no cover - machines without a C compiler
        pytest.skip("Task Bench kernels cannot be built here")
    rows, out = _tiny_experiment(tmp_path, METG)
    assert len(rows) == 4 and {r["target"] for r in rows} == {"mpi4py", "shoal-channel"}
    assert {r["bench"] for r in rows} == {"taskbench"} and {r["unit"] for r in rows} == {"us"}
    assert {r["metric"] for r in rows} == {"metg_us"} and all(0 < float(r["metg_us"]) < 1e5 for r in rows)
    assert {r["app_target"] for r in rows} == {"mpi4py", "shoal:channel"} and {r["steps"] for r in rows} == {"10"}
    assert not (tmp_path / "results").exists()  # --json without --out keeps no sweep files
    assert report_main([str(out), "-o", str(tmp_path / "rep")]) == 0
    assert "median (us)" in (tmp_path / "rep" / "report.html").read_text()


@pytest.mark.mpi
def test_a_stencil_benchmark_runs_as_an_experiment(tmp_path: Path) -> None:
    """bench = "stencil": a row per system, pes and trial, seconds per step, reported in ms."""
    rows, out = _tiny_experiment(tmp_path, STENCIL)
    assert len(rows) == 8 and {r["target"] for r in rows} == {"c", "shoal"}
    assert {r["bench"] for r in rows} == {"stencil"} and {r["unit"] for r in rows} == {"s"}
    assert {(r["target"], r["pes"], r["command"].split("--systems ")[1].split()[0]) for r in rows} == {
        ("c", "1", "c"), ("c", "2", "c"), ("shoal", "1", "shoal-1pe"), ("shoal", "2", "shoal-2pe")}
    assert all(0 < float(r["time_per_step"]) < 1 for r in rows) and {r["n"] for r in rows} == {"64"}
    assert report_main([str(out), "-o", str(tmp_path / "rep")]) == 0
    assert "median (ms)" in (tmp_path / "rep" / "report.html").read_text()


def test_a_failed_stencil_system_is_named_in_the_error() -> None:
    record = {"bench": "stencil", "rows": [{"problem": "jacobi", "system": "c-omp2", "error": "failed: no -fopenmp"}]}
    with pytest.raises(RuntimeError, match="error: failed: no -fopenmp"):
        runner.run_once([sys.executable, "-c", f"print({json.dumps(json.dumps(record))})"], "time_per_step", 60)


def test_a_yaml_experiment_is_the_toml_one() -> None:
    """The YAML example plans exactly what its TOML twin does."""
    from shoal.bench.evaluation import spec

    examples = EXAMPLES
    yaml_exp, toml_exp = spec.load(examples / "experiment_jacobi2d_odf.yaml"), spec.load(examples / "experiment_jacobi2d_odf.toml")
    import dataclasses

    assert dataclasses.replace(yaml_exp, source="") == dataclasses.replace(toml_exp, source="")
    assert [(r.target, r.trial) for r in spec.plan(yaml_exp, seed=3)] == [(r.target, r.trial) for r in spec.plan(toml_exp, seed=3)]


@pytest.mark.parametrize("text, message", [
    ("app: [jacobi2d\n", "not valid YAML"),
    ("- app\n- jacobi2d\n", "holds a mapping of keys"),
    ("app: jacobi2d\ntargets: [shoal]\npes: 1\ntrials: 2\nsizes: [4]\n", "unknown key 'sizes'"),
])
def test_bad_yaml_experiment_files_name_the_problem(tmp_path: Path, capsys: pytest.CaptureFixture,
                                                    text: str, message: str) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(text)
    assert experiment_main([str(bad), "--out", str(tmp_path / "r.csv")]) == 2
    assert message in capsys.readouterr().err
