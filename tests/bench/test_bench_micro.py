"""``shoal bench micro``: options, data patterns, outputs, and quick real runs of every
test on every installed target with ``--validate``.

Unit tests need no MPI. Tests marked ``mpi`` start real jobs (``mpiexec``, or
charmrun for Charm4py); each runs a whole suite in one job (``all --quick``) to keep
the file fast on two cores.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest
from support.commands import clean_env

from shoal.bench.micro import buffers, c_baseline, catalog, cli, data, options, osu, targets
from shoal.bench.micro.catalog import TESTS
from shoal.bench.micro.report import Reporter

HAVE_CHARM4PY = importlib.util.find_spec("charm4py") is not None
HAVE_MPICC = shutil.which("mpicc", path=os.path.dirname(sys.executable)) or shutil.which("mpicc")
QUICK = [1, 16, 256, 4096, 65536]
QUICK_FLOAT = [4, 64, 1024, 16384]


def micro(*args: str, timeout: float = 120, env: dict | None = None) -> subprocess.CompletedProcess:
    """Run ``shoal bench micro ARGS`` as a user would, capturing its output."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("SHOAL_", "PMI_", "MPI_LOCAL", "HYDRA_"))}
    environ.update(env or {})
    cmd = [sys.executable, "-m", "shoal", "bench", "micro", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=environ)


def run_main(capsys: pytest.CaptureFixture, *args: str) -> tuple[int, str, str]:
    """Run the command in this process (for errors raised before any job starts)."""
    code = cli.main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


# -- the option table --------------------------------------------------------------------
def test_every_target_names_real_tests_and_buffers():
    for target in targets.TARGETS.values():
        for api, tests in target.apis.items():
            assert tests and set(tests) <= set(TESTS), (target.name, api)
        assert set(target.buffers) <= set(buffers.KINDS) | {"malloc"}
    assert set(catalog.POINT_TO_POINT) | set(catalog.COLLECTIVES) == set(TESTS)


def test_defaults_follow_osu():
    cfg = options.parse(["latency"])
    assert (cfg.target, cfg.api, cfg.buffer, cfg.device, cfg.pes, cfg.window) == ("shoal", "entry", "numpy", "cpu", 2, 64)
    lat, bw, coll = TESTS["latency"], TESTS["bw"], TESTS["allreduce"]
    assert cfg.sizes(lat) == [1 << k for k in range(23)]  # 1 B .. 4 MiB
    assert cfg.sizes(coll) == [1 << k for k in range(2, 21)]  # float32: 4 B .. 1 MiB
    assert cfg.counts(lat, 8192) == (10000, 100) and cfg.counts(lat, 16384) == (1000, 10)
    assert cfg.counts(bw, 8192) == (100, 10) and cfg.counts(bw, 16384) == (20, 2)
    assert cfg.counts(coll, 16384) == (100, 10)
    assert options.parse(["barrier"]).sizes(TESTS["barrier"]) == [0]


def test_iterations_options_divide_like_osu():
    cfg = options.parse(["latency", "-i", "500", "-x", "50", "-m", "0:64"])
    lat = TESTS["latency"]
    assert cfg.sizes(lat) == [0, 1, 2, 4, 8, 16, 32, 64]
    assert cfg.counts(lat, 64) == (500, 50)
    assert cfg.counts(lat, 1 << 20) == (50, 5)  # latency runs a tenth above 8 KiB
    cfg = options.parse(["bw", "-i", "100", "--iterations-large", "7", "--warmup-large", "0", "--large-size", "1024"])
    assert cfg.counts(TESTS["bw"], 2048) == (7, 0)
    quick = options.parse(["all", "--quick"])
    assert quick.sizes(lat) == QUICK and quick.sizes(TESTS["reduce"]) == QUICK_FLOAT
    assert quick.counts(lat, 1) == (10, 2) and quick.counts(lat, 65536) == (3, 1) and quick.window == 4


def test_all_selects_what_the_target_and_pe_count_allow():
    assert options.parse(["all"]).tests == tuple(TESTS)
    assert options.parse(["all", "--api", "channel"]).tests == catalog.POINT_TO_POINT
    assert options.parse(["all", "-n", "3"]).tests == catalog.COLLECTIVES
    assert "multi_lat" in options.parse(["all", "-n", "4"]).tests
    assert options.parse(["all", "--target", "charm4py"]).tests == ("latency", "bw")
    assert options.parse(["latency,bcast", "--target", "mpi4py"]).tests == ("latency", "bcast")
    assert options.parse(["all", "--target", "mpi4py", "--pickle"]).api == "pickle"


@pytest.mark.parametrize(
    "args, words",
    [
        (["nope"], ["unknown test 'nope'", "latency", "scatterv", "all"]),
        (["latency", "--target", "nope"], ["unknown target 'nope'", "shoal", "mpi4py", "charm4py", "c"]),
        (["latency", "--buffer", "nope"], ["unknown buffer 'nope'", "bytearray", "numpy", "cupy", "numba", "pycuda"]),
        (["latency", "--device", "tpu"], ["unknown device 'tpu'", "cpu", "cuda"]),
        (["latency", "--api", "rdma"], ["no --api rdma", "entry", "channel"]),
        (["allreduce", "--api", "channel"], ["has no allreduce test", "latency", "bw"]),
        (["reduce_scatter", "--target", "mpi4py", "--pickle"], ["has no reduce_scatter test"]),
        (["latency", "--pickle"], ["--pickle", "--target mpi4py"]),
        (["latency", "-n", "3"], ["exactly 2 PEs", "multi_lat"]),
        (["multi_lat", "-n", "3"], ["even number"]),
        (["latency", "--device", "cuda", "--buffer", "numpy"], ["--buffer cupy|numba|pycuda"]),
        (["latency", "--target", "c", "--buffer", "numpy"], ["malloc"]),
        (["latency", "-m", "3:8"], ["power of two"]),
        (["latency", "-m", "big"], ["MIN:MAX"]),
        (["latency", "-i", "0"], ["-i must be at least 1"]),
        (["bw", "--target", "mpi4py", "--lend"], ["--lend", "--target shoal"]),
        (["bw", "--buffer", "bytearray", "--lend"], ["--lend", "--buffer numpy"]),
        (["latency", "--frobnicate"], ["unrecognized arguments: --frobnicate", "valid options:", "--validate", "--json"]),
    ],
)
def test_bad_options_name_the_valid_ones(capsys, args, words):
    code, out, err = run_main(capsys, *args)
    assert code == 2 and out == ""
    assert err.startswith("shoal bench micro: ")
    for word in words:
        assert word in err, err
    assert "--corrupt-for-testing" not in err


def test_help_lists_options(capsys):
    code, out, _ = run_main(capsys, "--help")
    assert code == 0 and "--validate" in out and "--quick" in out and "multi_lat" in out


# -- GPU buffers: clean failures here, real runs where there is a GPU -----------------------
@pytest.mark.parametrize("kind", buffers.GPU_KINDS)
def test_gpu_buffer_without_package_or_gpu_fails_in_one_line(capsys, kind):
    reason = buffers.unavailable(kind)
    if reason is None:
        pytest.skip(f"{kind} and a GPU are available here")
    target = ("--target", "mpi4py") if kind == "pycuda" else ()  # (shoal sends no PyCUDA arrays)
    code, out, err = run_main(capsys, "latency", "--buffer", kind, *target)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and kind in err and ("not installed" in err or "GPU" in err)
    code, _, err2 = run_main(capsys, "latency", "--device", "cuda")  # cupy is the default on cuda
    assert code == 2 and err2.count("\n") == 1


STAGED_PROGRAM = """
import sys
import numpy as np
from shoal.bench.micro import buffers, mpi4py_target, options

class HostAsDevice(buffers.CupyKind):
    # host memory posing as CuPy's: counts the copies a staged transfer makes
    copies = 0
    def missing(self): return None
    def from_host(self, data): return np.array(data)
    def to_host(self, buf):
        HostAsDevice.copies += 1
        return np.array(buf).reshape(-1).view(np.uint8)
    def _copy_in(self, buf, host):
        HostAsDevice.copies += 1
        buf.view(np.uint8)[:] = host

buffers.KINDS["cupy"] = HostAsDevice
cfg = options.parse([sys.argv[1], "--target", "mpi4py", "--device", "cuda", "--gpu-path", "staged", "--quick",
                     "--validate", "-m", "8:4096", "-W", "4"])
code = mpi4py_target.run(cfg)
sys.stderr.write(f"copies {HostAsDevice.copies}\\n")  # one write: the PEs share stderr
sys.stderr.flush()
sys.exit(code)
"""


@pytest.mark.mpi
@pytest.mark.parametrize("test", ["bw", "bibw"])
def test_mpi4py_stages_device_buffers_for_bandwidth(tmp_path, test):
    """mpi4py without a CUDA-aware MPI: each message of the window is copied to host memory,
    sent, and copied onto the device at the receiver (validated)."""
    from shoal.launcher import find_mpiexec

    prog = tmp_path / "staged.py"
    prog.write_text(STAGED_PROGRAM)
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("SHOAL_", "PMI_", "MPI_LOCAL", "HYDRA_"))}
    proc = subprocess.run([find_mpiexec(), "-n", "2", sys.executable, str(prog), test], capture_output=True,
                          text=True, timeout=120, env=environ)
    assert proc.returncode == 0, proc.stderr
    assert [s for s, _ in osu.parse(proc.stdout)] == [8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096]
    copies = [int(n) for n in re.findall(r"copies (\d+)", proc.stderr)]
    # QUICK_COUNTS: 10 + 2 iterations of a 4-message window, at each of 10 sizes, copied out and in
    assert len(copies) == 2 and min(copies) >= 10 * 12 * 4, copies


@pytest.mark.mpi
@pytest.mark.parametrize("kind", buffers.GPU_KINDS)
@pytest.mark.parametrize("target", ["mpi4py", "shoal"])
def test_gpu_buffers_validate(kind, target):
    reason = buffers.unavailable(kind)
    if reason is not None:
        pytest.skip(reason)
    proc = micro("latency", "--target", target, "--buffer", kind, "--quick", "--validate")
    assert proc.returncode == 0, proc.stderr
    assert [s for s, _ in osu.parse(proc.stdout)] == QUICK


# -- the data: patterns and what each PE must receive ---------------------------------------
def test_patterns_are_written_and_distinct():
    a, b = data.block(1000, 0, 1), data.block(1000, 1, 0)
    assert a.any() and not np.array_equal(a, b) and len(np.unique(a)) > 200
    assert (data.fblock(7, 3) >= 1).all()
    assert data.split(10, 3) == [4, 3, 3] and data.split(1, 2) == [1, 0]
    assert [data.partner(r, 4) for r in range(4)] == [2, 3, 0, 1]


@pytest.mark.parametrize("n", [2, 3, 4])
@pytest.mark.parametrize("name", catalog.COLLECTIVES)
def test_expected_contents_follow_from_the_payloads(name, n):
    """Simulate each collective in NumPy from every PE's payload; it must give `expected`."""
    test, size = TESTS[name], 64
    sent = [data.payload(test, size, r, n) for r in range(n)]
    base = name.rstrip("v") if test.vector else name
    total = np.sum(sent, axis=0, dtype=np.float32) if test.dtype == "float" else None
    for r in range(n):
        want = data.expected(test, size, r, n)
        got = {
            "allgather": np.concatenate(sent),
            "gather": np.concatenate(sent) if r == 0 else None,
            "bcast": sent[0] if r else None,
            "scatter": sent[0][r * size : (r + 1) * size],
            "alltoall": np.concatenate([s[r * size : (r + 1) * size] for s in sent]),
            "allreduce": total,
            "reduce": total if r == 0 else None,
            "reduce_scatter": None if total is None else np.split(total, np.cumsum(data.split(size // 4, n))[:-1])[r],
            "barrier": None,
        }[base]
        if got is None:
            assert want is None
        else:
            assert data.compare(got, want, "sim") is None


def test_compare_reports_what_differs():
    want = data.block(100, 0, 1)
    assert data.compare(want.copy(), want, "x") is None
    bad = want.copy()
    bad[17] ^= 1
    msg = data.compare(bad, want, "latency 100 B on PE 1")
    assert msg and msg.startswith("latency 100 B on PE 1: 1 of 100 bytes differ, first at byte 17")
    assert "received 99 bytes, expected 100" in data.compare(want[:99], want, "x")
    assert data.compare(want.copy(), want, "x", corrupt=True) is not None
    assert data.compare(np.full(100, data.POISON, np.uint8), want, "x") is not None  # an unwritten buffer fails


@pytest.mark.parametrize("kind", buffers.CPU_KINDS)
def test_cpu_buffer_kinds_round_trip(kind):
    k = buffers.get(kind)
    payload = data.block(32, 2, 3)
    assert np.array_equal(k.to_host(k.from_host(payload)), payload)
    assert (k.to_host(k.alloc(16)) == data.POISON).all()
    floats = k.from_host(data.fblock(8, 1))
    assert np.array_equal(k.typed(floats), data.fblock(8, 1))
    assert k.sendable(floats) is floats


# -- outputs and the parser ---------------------------------------------------------------
def _result(test: str = "latency") -> osu.Result:
    r = osu.Result(test, "shoal", "entry", "numpy", 2, TESTS[test].unit)
    r.add(1, 2.5, 10)
    r.add(4194304, 1234.5678, 3)
    r.add(8, None, 1)  # not measured on this PE: no row
    return r


def test_text_output_is_osu_7():
    text = osu.render(_result(), "text")
    lines = text.splitlines()
    assert lines[0].startswith("# OSU MPI-Python Latency Test v7.x") and "target shoal, api entry" in lines[0]
    assert lines[1] == "# Datatype: MPI_CHAR."
    assert lines[2] == "# Size       Avg Latency(us)"
    assert lines[3] == "%-10d%18.2f" % (1, 2.5) and lines[4] == "4194304" + " " * 14 + "1234.57"
    assert osu.parse(text) == [(1, 2.5), (4194304, 1234.57)]
    bw = osu.render(_result("bw"), "text").splitlines()
    assert bw[2] == "# Size      Bandwidth (MB/s)"
    barrier = osu.Result("barrier", "c", None, "malloc", 2, "us")
    barrier.add(0, 1.41, 10)
    text = osu.render(barrier, "text")
    assert text.splitlines()[0].startswith("# OSU MPI Barrier Latency Test") and "# Avg Latency(us)" in text
    assert osu.parse(text) == [(0, 1.41)]


def test_json_and_csv_outputs():
    obj = json.loads(osu.render(_result(), "json"))
    assert list(obj) == ["test", "target", "api", "buffer", "pes", "unit", "rows"]
    assert obj["rows"] == [{"size": 1, "value": 2.5, "iterations": 10}, {"size": 4194304, "value": 1234.5678, "iterations": 3}]
    assert obj["unit"] == "us" and obj["pes"] == 2
    csv = osu.render(_result("bw"), "csv").splitlines()
    assert csv[0] == "test,target,api,buffer,pes,unit,size,value,iterations"
    assert csv[1] == "bw,shoal,entry,numpy,2,MB/s,1,2.5,10"
    assert osu.render(_result("bw"), "csv", first=False).splitlines()[0].startswith("bw,")
    head = osu.preamble("json", "bw", "c", None, "malloc", 2)
    assert json.loads(head + "]}")["rows"] == []  # what the C program completes


def test_parser_rejects_stray_output_and_splits_suites():
    with pytest.raises(ValueError, match="not an OSU result row"):
        osu.parse("# OSU x\nhello world\n")
    both = osu.render(_result(), "text") + "\n" + osu.render(_result("bw"), "text")
    blocks = osu.split(both)
    assert [len(rows) for _, rows in blocks] == [2, 2] and "Bandwidth" in blocks[1][0]


def test_reporter_exit_code_and_failures(capsys):
    cfg = options.parse(["latency", "--validate"])
    rep = Reporter(cfg)
    good, bad = _result(), _result()
    bad.failures = ["latency 1 B on PE 1: 1 of 1 bytes differ"]
    rep.emit(good)
    assert rep.finish() == 0
    rep.emit(bad)
    assert rep.finish() == 1
    out, err = capsys.readouterr()
    assert len(osu.split(out)) == 2
    assert "validation failed: latency 1 B on PE 1" in err and "validation FAILED in latency" in err


# -- the C baseline: build errors --------------------------------------------------------------
def test_c_baseline_compiler_failure_is_reported(tmp_path, monkeypatch, capsys):
    fake = tmp_path / "mpicc"
    fake.write_text("#!/bin/sh\necho 'micro.c:1:1: error: no MPI here' >&2\nexit 3\n")
    fake.chmod(0o755)
    monkeypatch.setenv("MPICC", str(fake))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    with pytest.raises(c_baseline.BuildError, match="error: no MPI here"):
        c_baseline.build()
    code, out, err = run_main(capsys, "latency", "--target", "c", "--quick")
    assert code == 1 and out == ""
    assert "compiling the C baseline failed" in err and "exit code 3" in err and "no MPI here" in err
    assert not list((tmp_path / "cache").rglob("shoal-micro"))  # nothing half-built is cached


def test_c_baseline_arguments_carry_the_schedule():
    cfg = options.parse(["latency,barrier", "--target", "c", "--quick", "--json"])
    args = c_baseline.command_args(cfg)
    assert args[:4] == ["json", "4", "0", "0"]
    assert args[4:7] == ["latency", "1,16,256,4096,65536", "10:2,10:2,10:2,10:2,3:1"]
    assert args[9:12] == ["barrier", "0", "10:2"]


# -- real jobs: every test, every installed target, --validate ---------------------------------
NEEDS_MPICC = pytest.mark.skipif(not HAVE_MPICC, reason="no mpicc")
NEEDS_CHARM4PY = pytest.mark.skipif(not HAVE_CHARM4PY, reason="charm4py is not installed (pip install charm4py)")


def suite(name: str, *args: str, tests: str = "all", marks: tuple = ()) -> object:
    """One job running ``tests`` (quick, validated) with ``args``."""
    return pytest.param(list(args), tests, id=name, marks=marks)


SUITES = [
    suite("shoal-entry", "--target", "shoal"),
    suite("shoal-channel", "--target", "shoal", "--api", "channel"),
    suite("shoal-entry-bytearray", "--target", "shoal", "--buffer", "bytearray"),
    suite("mpi4py-buffer", "--target", "mpi4py"),
    suite("mpi4py-pickle", "--target", "mpi4py", "--pickle"),
    suite("mpi4py-buffer-bytearray", "--target", "mpi4py", "--buffer", "bytearray"),
    suite("c", "--target", "c", marks=NEEDS_MPICC),
    suite("charm4py", "--target", "charm4py", marks=NEEDS_CHARM4PY),
    suite("shoal-3pes", "--target", "shoal", "-n", "3"),
    suite("mpi4py-3pes", "--target", "mpi4py", "-n", "3"),
    # the C program busy-polls, which is slow when 3 PEs share 2 cores: only the tests
    # whose data layout depends on the PE count
    suite("c-3pes", "--target", "c", "-n", "3", tests="reduce_scatter,alltoallv,gatherv,scatterv,allgather", marks=NEEDS_MPICC),
]


@pytest.mark.mpi
@pytest.mark.parametrize("args, tests", SUITES)
def test_every_benchmark_runs_and_validates(args, tests):
    proc = micro(tests, "--quick", "--validate", *args)
    assert proc.returncode == 0, proc.stderr
    assert "validation passed" in proc.stderr
    cfg = options.parse([tests, "--quick", *args])
    blocks = osu.split(proc.stdout)
    assert len(blocks) == len(cfg.tests) > 0
    for name, (title, rows) in zip(cfg.tests, blocks):
        test = TESTS[name]
        assert test.title in title and f"target {cfg.target}" in title and f"{cfg.pes} PEs" in title
        assert [s for s, _ in rows] == cfg.sizes(test), name
        # text rows have two decimals, so a slow 1-byte figure may print as 0.00
        assert all(v >= 0 for _, v in rows) and rows[-1][1] > 0, (name, rows)


@pytest.mark.mpi
def test_json_output_is_the_only_stdout():
    proc = micro("latency,allreduce,barrier", "--quick", "--json", "--target", "mpi4py")
    assert proc.returncode == 0, proc.stderr
    objs = [json.loads(line) for line in proc.stdout.splitlines()]
    assert [o["test"] for o in objs] == ["latency", "allreduce", "barrier"]
    for o in objs:
        assert set(o) == {"test", "target", "api", "buffer", "pes", "unit", "rows"}
        assert o["target"] == "mpi4py" and o["api"] == "buffer" and o["buffer"] == "numpy" and o["pes"] == 2
        assert all(set(r) == {"size", "value", "iterations"} for r in o["rows"])
    assert [r["size"] for r in objs[1]["rows"]] == QUICK_FLOAT and objs[1]["unit"] == "us"
    single = micro("bw", "--quick", "--json")
    assert json.loads(single.stdout)["unit"] == "MB/s"


@pytest.mark.mpi
@NEEDS_MPICC
def test_c_baseline_json_and_csv():
    proc = micro("bw,allreduce", "--quick", "--json", "--target", "c")
    assert proc.returncode == 0, proc.stderr
    objs = [json.loads(line) for line in proc.stdout.splitlines()]
    assert [(o["test"], o["api"], o["buffer"]) for o in objs] == [("bw", None, "malloc"), ("allreduce", None, "malloc")]
    assert [r["size"] for r in objs[0]["rows"]] == QUICK
    proc = micro("latency", "--quick", "--csv", "--target", "c")
    lines = proc.stdout.splitlines()
    assert lines[0] == "test,target,api,buffer,pes,unit,size,value,iterations"
    assert len(lines) == 6 and lines[1].startswith("latency,c,,malloc,2,us,1,")


@pytest.mark.mpi
@pytest.mark.parametrize(
    "args",
    [
        pytest.param(["bibw,alltoall,reduce_scatter", "--target", "shoal"], id="shoal"),
        pytest.param(["bw", "--target", "shoal", "--api", "channel"], id="shoal-channel"),
        pytest.param(["latency,allreduce", "--target", "mpi4py"], id="mpi4py"),
        pytest.param(["scatterv", "--target", "c"], id="c", marks=NEEDS_MPICC),
        pytest.param(["bw", "--target", "charm4py"], id="charm4py", marks=NEEDS_CHARM4PY),
    ],
)
def test_validate_catches_corruption(args):
    proc = micro(*args, "--quick", "--validate", "--corrupt-for-testing")
    assert proc.returncode == 1, proc
    assert "validation failed:" in proc.stderr and "bytes differ" in proc.stderr
    assert "validation FAILED in" in proc.stderr
    assert osu.split(proc.stdout)  # the figures are still printed


@pytest.mark.mpi
@pytest.mark.parametrize("target", ["mpi4py", "shoal", pytest.param("c", marks=NEEDS_MPICC)])
def test_runs_inside_a_job_started_by_mpiexec(target):
    from shoal.launcher import find_mpiexec

    environ = clean_env()
    cmd = [find_mpiexec(), "-n", "2", sys.executable, "-m", "shoal", "bench", "micro", "latency",
           "--target", target, "--quick", "--validate"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=environ)
    assert proc.returncode == 0, proc.stderr
    assert [s for s, _ in osu.parse(proc.stdout)] == QUICK
    assert proc.stdout.count("# OSU") == 1  # printed once, by PE 0


@NEEDS_CHARM4PY
def test_charm4py_refuses_to_run_under_mpiexec():
    proc = micro("latency", "--target", "charm4py", env={"PMI_SIZE": "2", "PMI_RANK": "0"})
    assert proc.returncode == 2 and "charmrun" in proc.stderr


def test_missing_charm4py_says_how_to_install(monkeypatch, capsys):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "charm4py" else real(name, *a))
    code, _out, err = run_main(capsys, "latency", "--target", "charm4py")
    assert code == 2 and err.count("\n") == 1 and "pip install charm4py" in err


@pytest.mark.mpi
@pytest.mark.parametrize("api", ["entry", "channel"])
def test_bandwidth_windows_of_lent_buffers_validate(api):
    proc = micro("bw,bibw", "--api", api, "--lend", "--quick", "--validate", "-m", "8:262144", "-W", "8")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.count("262144") == 2, proc.stdout  # the last row of both tests
