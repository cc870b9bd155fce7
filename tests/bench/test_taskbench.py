"""Task Bench: graphs, SipHash, kernels, validation, report, and every system (METG: test_bench_metg.py).

Unit tests run in this process; the ``mpi`` ones launch ``shoal bench taskbench``
under mpiexec with every pattern in one job (``-and``), one job per system.
"""

from __future__ import annotations

import importlib.util
import io
import random
import re
import subprocess
import sys

import numpy as np
import pytest
from support.commands import clean_env

from shoal.bench.taskbench import kernels, siphash
from shoal.bench.taskbench.app import UsageError, count_bytes, count_flops, parse, task_flops
from shoal.bench.taskbench.execute import PointRunner, ValidationError, imbalance_iterations
from shoal.bench.taskbench.graph import DependenceType, GraphError, Kernel, KernelType, TaskGraph, expand

try:
    kernels.library()
except kernels.NativeError as exc:  # pragma: no cover - machines without a C compiler
    pytest.skip(f"Task Bench kernels cannot be built: {exc}", allow_module_level=True)

# ---------------------------------------------------------------- SipHash

#: SipHash-2-4 reference vectors (the algorithm's published vectors.h, vectors_sip64):
#: key 00 01 .. 0f, message 00 01 .. (n-1) for n = 0..63, tag bytes least significant first
SIP64_VECTORS = [
    "310e0edd47db6f72", "fd67dc93c539f874", "5a4fa9d909806c0d", "2d7efbd796666785",
    "b7877127e09427cf", "8da699cd64557618", "cee3fe586e46c9cb", "37d1018bf50002ab",
    "6224939a79f5f593", "b0e4a90bdf82009e", "f3b9dd94c5bb5d7a", "a7ad6b22462fb3f4",
    "fbe50e86bc8f1e75", "903d84c02756ea14", "eef27a8e90ca23f7", "e545be4961ca29a1",
    "db9bc2577fcc2a3f", "9447be2cf5e99a69", "9cd38d96f0b3c14b", "bd6179a71dc96dbb",
    "98eea21af25cd6be", "c7673b2eb0cbf2d0", "883ea3e395675393", "c8ce5ccd8c030ca8",
    "94af49f6c650adb8", "eab8858ade92e1bc", "f315bb5bb835d817", "adcf6b0763612e2f",
    "a5c91da7acaa4dde", "716595876650a2a6", "28ef495c53a387ad", "42c341d8fa92d832",
    "ce7cf2722f512771", "e37859f94623f3a7", "381205bb1ab0e012", "ae97a10fd434e015",
    "b4a31508beff4d31", "81396229f0907902", "4d0cf49ee5d4dcca", "5c73336a76d8bf9a",
    "d0a704536ba93e0e", "925958fcd6420cad", "a915c29bc8067318", "952b79f3bc0aa6d4",
    "f21df2e41d4535f9", "87577519048f53a9", "10a56cf5dfcd9adb", "eb75095ccd986cd0",
    "51a9cb9ecba312e6", "96afadfc2ce666c7", "72fe52975a4364ee", "5a1645b276d592a1",
    "b274cb8ebf87870a", "6f9bb4203de7b381", "eaecb2a30b22a87f", "9924a43cc1315724",
    "bd838d3aafbf8db7", "0b1a2a3265d51aea", "135079a3231ce660", "932b2846e4d70666",
    "e1915f5cb1eca46c", "f325965ca16d629f", "575ff28e60381be5", "724506eb4c328a95",
]


@pytest.mark.parametrize("impl", [siphash.siphash24, kernels.siphash24], ids=["python", "c"])
def test_siphash_reference_vectors(impl):
    key = bytes(range(16))
    assert len(SIP64_VECTORS) == 64
    for n, expected in enumerate(SIP64_VECTORS):
        assert impl(bytes(range(n)), key).to_bytes(8, "little").hex() == expected, f"message length {n}"


def test_random_uniform_is_siphash_of_longs_under_task_bench_key():
    rng = random.Random(7)
    for _ in range(200):
        values = tuple(rng.randrange(-(2**40), 2**40) for _ in range(rng.randrange(1, 6)))
        expected = siphash.siphash24(b"".join(v.to_bytes(8, "little", signed=True) for v in values),
                                     bytes([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 0])) / 2**64
        assert siphash.random_uniform(values) == expected == kernels.random_uniform(values)
        assert 0.0 <= expected < 1.0


# ---------------------------------------------------------------- graphs

PATTERNS = [d.value for d in DependenceType]


def graph(kind: str, width: int = 8, steps: int = 6, **kw) -> TaskGraph:
    d = DependenceType(kind)
    kw.setdefault("period", 2 if d in (DependenceType.SPREAD, DependenceType.RANDOM_NEAREST) else 0)
    return TaskGraph(timesteps=steps, max_width=width, dependence=d, **kw)


@pytest.mark.parametrize("kind", PATTERNS)
@pytest.mark.parametrize("width", [1, 2, 3, 5, 8, 13])
def test_every_pattern_is_well_formed_and_reverse_dependencies_mirror(kind, width):
    kw = {"radix": 2, "period": 1} if kind == "spread" and width < 6 else {}
    if kind == "spread" and width == 1:
        kw = {"radix": 1, "period": 1}
    g = graph(kind, width, steps=7, **kw)
    g.check()
    for dset in range(g.max_dependence_sets()):
        forward = {p: set(expand(g.dependencies(dset, p))) for p in range(width)}
        for q in range(width):
            assert set(expand(g.reverse_dependencies(dset, q))) == {p for p in range(width) if q in forward[p]}
    for t in range(g.timesteps):
        off, w = g.offset_at_timestep(t), g.width_at_timestep(t)
        assert 0 <= off and off + w <= width and w >= 1
        for p in range(off, off + w):
            prev = range(g.offset_at_timestep(t - 1), g.offset_at_timestep(t - 1) + g.width_at_timestep(t - 1))
            assert all(q in prev for q in g.inputs(t, p))  # dependencies outside the last row dropped
            for q in g.inputs(t, p):
                assert p in g.outputs(t - 1, q)  # inputs and outputs agree task by task
    assert all(g.inputs(0, p) == () for p in range(width))


def test_widths_and_offsets_of_dom_and_tree():
    dom = graph("dom", width=3, steps=4)
    assert [dom.offset_at_timestep(t) for t in range(4)] == [0, 0, 1, 2]
    assert [dom.width_at_timestep(t) for t in range(4)] == [1, 2, 2, 1]
    assert dom.inputs(1, 1) == (0,) and dom.inputs(2, 1) == (0, 1) and dom.inputs(3, 2) == (1, 2)
    tree = graph("tree", width=8, steps=5)
    assert [tree.width_at_timestep(t) for t in range(5)] == [1, 2, 4, 8, 8]
    assert [tree.offset_at_timestep(t) for t in range(5)] == [0] * 5
    assert tree.dependencies(0, 5) == ((2, 2),)
    assert tree.reverse_dependencies(0, 2) == ((4, 5),) and tree.reverse_dependencies(0, 4) == ()
    assert tree.outputs(1, 1) == (2, 3) and tree.outputs(0, 0) == (0, 1)
    for kind in ("stencil_1d", "fft", "all_to_all", "nearest", "spread", "random_nearest"):
        g = graph(kind, width=8, steps=4)
        assert [g.width_at_timestep(t) for t in range(-1, 4)] == [0, 8, 8, 8, 8]


def test_hand_computed_dependencies():
    assert graph("trivial").dependencies(0, 3) == ()
    assert graph("no_comm").dependencies(0, 3) == ((3, 3),)
    s = graph("stencil_1d", width=4)
    assert [s.dependencies(0, p) for p in range(4)] == [((0, 1),), ((0, 2),), ((1, 3),), ((2, 3),)]
    sp = graph("stencil_1d_periodic", width=4)
    assert sp.dependencies(0, 0) == ((0, 1), (3, 3)) and sp.dependencies(0, 3) == ((2, 3), (0, 0))
    assert graph("stencil_1d_periodic", width=2).dependencies(0, 0) == ((0, 1),)  # no duplicate wrap
    fft = graph("fft", width=8)
    assert fft.max_dependence_sets() == 3
    assert [fft.dependence_set_at_timestep(t) for t in range(4)] == [2, 0, 1, 2]
    assert fft.dependencies(0, 3) == ((2, 2), (3, 3), (4, 4)) and fft.dependencies(2, 3) == ((3, 3), (7, 7))
    assert graph("all_to_all", width=5).dependencies(0, 2) == ((0, 4),)
    n3, n4 = graph("nearest", radix=3), graph("nearest", radix=4)
    assert n3.dependencies(0, 0) == ((0, 1),) and n3.dependencies(0, 4) == ((3, 5),)
    assert n4.dependencies(0, 4) == ((2, 5),) and n4.reverse_dependencies(0, 4) == ((3, 6),)
    assert graph("nearest", radix=0).dependencies(0, 4) == ()
    sp9 = graph("spread", width=9, radix=3, period=3)
    assert sp9.dependencies(1, 2) == ((2, 2), (6, 6), (0, 0))
    assert sp9.reverse_dependencies(1, 0) == ((0, 0), (5, 5), (2, 2))
    assert [sp9.dependence_set_at_timestep(t) for t in range(5)] == [0, 1, 2, 0, 1]


def test_random_nearest_uses_the_reference_hash_of_producer_and_consumer():
    g = graph("random_nearest", width=12, radix=5, period=3, fraction_connected=0.5, graph_index=2)
    for dset in range(3):
        for p in range(12):
            expected = [q for q in range(max(0, p - 2), min(p + 2, 11) + 1)
                        if q == p or siphash.random_uniform((2, 5, dset, q, p)) < 0.5]
            assert list(expand(g.dependencies(dset, p))) == expected
    full = graph("random_nearest", width=12, radix=5, period=1, fraction_connected=1.0)
    assert full.dependencies(0, 6) == graph("nearest", width=12, radix=5).dependencies(0, 6)
    none = graph("random_nearest", width=12, radix=5, period=1, fraction_connected=0.0)
    assert all(none.dependencies(0, p) == ((p, p),) for p in range(12))


def test_graph_check_rejects_what_the_reference_rejects():
    with pytest.raises(GraphError, match="requires a non-zero period"):
        graph("spread", period=0).check()
    with pytest.raises(GraphError, match="does not support user-configurable period"):
        graph("stencil_1d", period=2).check()
    with pytest.raises(GraphError, match="period that is at most 3"):
        graph("spread", width=8, radix=3, period=4).check()
    with pytest.raises(GraphError, match="twice"):
        graph("spread", width=2, radix=3, period=1).check()


# ---------------------------------------------------------------- command line and report


def test_flags_and_several_graphs():
    app = parse("-steps 5 -width 6 -type spread -radix 2 -kernel compute_bound -iter 7 -and -type nearest "
                "-output 32 -n 3 --system shoal".split())
    a, b = app.graphs
    assert (a.graph_index, a.timesteps, a.max_width, a.dependence, a.radix, a.period) == (0, 5, 6, DependenceType.SPREAD, 2, 3)
    assert a.kernel == Kernel(KernelType.COMPUTE_BOUND, 7, 16, 0.0)
    assert (b.graph_index, b.timesteps, b.max_width, b.period, b.output_bytes_per_task) == (1, 4, 4, 0, 32)
    assert (app.pes, app.system) == (3, "shoal")
    for bad, msg in [("-type random_spread", "never implemented"), ("-output 8", "must be >= 16"),
                     ("-bogus 1", "valid flags"), ("-kernel compute_dgemm", "not implemented"),
                     ("-steps", "requires an argument"), ("-fraction 2", "must be <= 1"),
                     ("-type spread -width 4", "period that is at most")]:
        with pytest.raises(UsageError, match=msg):
            parse(bad.split())


def test_report_has_the_reference_lines():
    app = parse("-steps 3 -width 4 -type stencil_1d -kernel compute_bound -iter 10".split())
    out = io.StringIO()
    app.display(out)
    app.report_timing(0.5, out)
    text = out.getvalue()
    assert re.search(r"^\s*Time Steps: 3$", text, re.M) and re.search(r"^\s*Max Width: 4$", text, re.M)
    assert re.search(r"^\s*Iterations: 10$", text, re.M) and re.search(r"^\s*Output Bytes: 16$", text, re.M)
    assert "Total Tasks 12\n" in text and "Total Dependencies 20\n" in text
    assert f"Total FLOPs {12 * (2 * 64 * 10 + 64)}\n" in text
    assert "Elapsed Time 5.000000e-01 seconds\n" in text and f"FLOP/s {12 * 1344 / 0.5:e}\n" in text


# ---------------------------------------------------------------- kernels


def test_kernel_flop_and_byte_counts():
    assert task_flops(Kernel(KernelType.COMPUTE_BOUND, 100)) == 2 * 64 * 100 + 64
    assert task_flops(Kernel(KernelType.COMPUTE_BOUND2, 100)) == 2 * 32 * 100
    for k in (KernelType.EMPTY, KernelType.BUSY_WAIT, KernelType.MEMORY_BOUND):
        assert task_flops(Kernel(k, 100)) == 0
    tree = graph("tree", width=8, steps=5, kernel=Kernel(KernelType.COMPUTE_BOUND, 3))
    assert count_flops(tree) == (1 + 2 + 4 + 8 + 8) * (2 * 64 * 3 + 64)
    mem = graph("stencil_1d", width=4, steps=3, kernel=Kernel(KernelType.MEMORY_BOUND, 6, 4), scratch_bytes_per_task=64)
    assert count_bytes(mem) == 12 * (64 * 6 // 4)
    imb = graph("stencil_1d", width=4, steps=3, kernel=Kernel(KernelType.LOAD_IMBALANCE, 1000, 16, 1.5), graph_index=1)
    per_task = []
    for t in range(3):
        for p in range(4):
            u = siphash.random_uniform((1, t, p))
            x = (1 + (u - 0.5) * 1.5) * 1000
            iters = int(np.floor(x + 0.5))  # C round(): half away from zero
            assert imbalance_iterations(imb, t, p) == iters
            per_task.append(iters)
    assert len(set(per_task)) > 1
    assert count_flops(imb) == sum(2 * 64 * i + 64 for i in per_task)
    flat = graph("stencil_1d", width=4, steps=3, kernel=Kernel(KernelType.LOAD_IMBALANCE, 1000, 16, 0.0))
    assert count_flops(flat) == 12 * (2 * 64 * 1000 + 64)


@pytest.mark.parametrize("kernel", list(KernelType))
def test_every_kernel_runs_natively(kernel):
    g = graph("no_comm", width=1, steps=3, kernel=Kernel(kernel, 50, 4, 0.5), scratch_bytes_per_task=256)
    r = PointRunner(g, 0)
    for t in range(3):
        if t:
            r.rows[0][:] = r.output
        r.execute(t)
    assert r.output.view(np.int64).tolist() == [2, 0]


# ---------------------------------------------------------------- validation


def _runner_at_step_one():
    g = graph("stencil_1d", width=4, steps=3, output_bytes_per_task=48, scratch_bytes_per_task=64)
    r = PointRunner(g, 1)
    for k, q in enumerate(g.inputs(1, 1)):
        r.rows[k].view(np.int64)[:] = [0, q] * 3
    return g, r


def test_correct_inputs_pass_and_output_is_written():
    _, r = _runner_at_step_one()
    r.execute(1)
    assert r.output.view(np.int64).tolist() == [1, 1] * 3


def test_corrupted_input_is_caught_naming_task_and_input():
    _, r = _runner_at_step_one()
    r.rows[2].view(np.int64)[4:6] = [0, 7]  # third input (from point 2), third pair
    with pytest.raises(ValidationError, match=r"task \(timestep 1, point 1\): input 2 \(from point 2 at timestep 0\) "
                                              r"is corrupted: at pair 2 expected \(timestep 0, point 2\) but got \(timestep 0, point 7\)"):
        r.execute(1)


def test_wrong_size_stale_input_and_scratch_are_caught():
    _, r = _runner_at_step_one()
    r.input_bytes[1] = 32
    with pytest.raises(ValidationError, match=r"input 1 \(from point 1 at timestep 0\) has 32 bytes, expected 48"):
        r.execute(1)
    _, r = _runner_at_step_one()
    r.rows[0].view(np.int64)[0] = 1  # a value from the wrong timestep
    with pytest.raises(ValidationError, match="expected \\(timestep 0, point 0\\) but got \\(timestep 1, point 0\\)"):
        r.execute(1)
    _, r = _runner_at_step_one()
    r.scratch[:8] = 0
    with pytest.raises(ValidationError, match="sentinel"):
        r.execute(1)


# ---------------------------------------------------------------- systems

#: every pattern in one run, several kernels, a wider output, scratch
ALL_PATTERNS = (
    "-steps 9 -width 6 -type trivial -kernel compute_bound -iter 3 "
    "-and -steps 9 -width 6 -type no_comm -kernel busy_wait -iter 5 "
    "-and -steps 9 -width 6 -type stencil_1d -kernel memory_bound -iter 5 -scratch 512 -sample 4 "
    "-and -steps 9 -width 6 -type stencil_1d_periodic -kernel compute_bound2 -iter 2 "
    "-and -steps 9 -width 6 -type dom "
    "-and -steps 9 -width 6 -type tree -output 48 "
    "-and -steps 9 -width 6 -type fft "
    "-and -steps 9 -width 6 -type all_to_all "
    "-and -steps 9 -width 6 -type nearest -radix 4 "
    "-and -steps 9 -width 6 -type spread -radix 3 -period 2 "
    "-and -steps 9 -width 6 -type random_nearest -radix 5 -fraction 0.5 -kernel load_imbalance -iter 20 -imbalance 1.0"
).split()


def _expected_totals() -> dict[str, int]:
    app = parse(ALL_PATTERNS)
    out = io.StringIO()
    app.report_timing(1.0, out)
    text = out.getvalue()
    return {k: int(re.search(rf"^{k} (\d+)$", text, re.M).group(1)) for k in ("Total Tasks", "Total Dependencies", "Total FLOPs")}


def _check_run(stdout: str) -> None:
    expected = _expected_totals()
    for key, value in expected.items():
        assert re.search(rf"^{key} {value}$", stdout, re.M), (key, value, stdout[-2000:])
    assert re.search(r"^Elapsed Time [0-9.e+-]+ seconds$", stdout, re.M)
    assert stdout.count("Task Graph ") == 11


def test_shoal_runs_every_pattern_in_process():
    from shoal.bench.taskbench.systems import shoal_system

    app = parse([*ALL_PATTERNS, "--system", "shoal", "--transport", "inproc", "-n", "3"])
    for api in ("entry", "channel", "set"):
        app.api = api
        out = io.StringIO()
        assert shoal_system.main(app, out) == 0
        _check_run(out.getvalue())


def _taskbench(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    env = clean_env()
    env["SHOAL_DEADLOCK_TIMEOUT"] = "5"
    return subprocess.run([sys.executable, "-m", "shoal", "bench", "taskbench", *args], capture_output=True,
                          text=True, timeout=timeout, env=env)


@pytest.mark.mpi
@pytest.mark.parametrize("system", [["--system", "mpi4py"], ["--system", "shoal", "--api", "entry"],
                                    ["--system", "shoal", "--api", "channel"], ["--system", "shoal", "--api", "set"]],
                         ids=["mpi4py", "shoal-entry", "shoal-channel", "shoal-set"])
def test_system_runs_every_pattern_under_mpiexec(system):
    proc = _taskbench("-n", "2", *system, *ALL_PATTERNS)
    assert proc.returncode == 0, proc.stderr[-3000:]
    _check_run(proc.stdout)


@pytest.mark.mpi
def test_charm4py_runs_every_pattern():
    if importlib.util.find_spec("charm4py") is None:
        pytest.skip("--system charm4py needs charm4py: pip install charm4py")
    proc = _taskbench("-n", "2", "--system", "charm4py", *ALL_PATTERNS)
    assert proc.returncode == 0, proc.stderr[-3000:]
    _check_run(proc.stdout)


def test_dask_runs_every_pattern_on_a_local_cluster():
    if importlib.util.find_spec("distributed") is None:
        pytest.skip("--system dask needs dask.distributed: pip install 'dask[distributed]'")
    proc = _taskbench("-n", "2", "--system", "dask", *ALL_PATTERNS)
    assert proc.returncode == 0, proc.stderr[-3000:]
    _check_run(proc.stdout)


def test_missing_peer_says_how_to_install_it(monkeypatch):
    from shoal.bench.taskbench.systems import SYSTEMS

    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None)
    assert SYSTEMS["dask"].missing() == ("--system dask needs the distributed package, which is not installed: "
                                         "pip install 'dask[distributed]'")
    assert SYSTEMS["ray"].missing() == "--system ray needs the ray package, which is not installed: pip install ray"


CORRUPTED = ("Task Bench validation failed: graph 0 task (timestep 3, point 2): input 0 (from point 1 at timestep 2) "
             "is corrupted: at pair 0 expected (timestep 2, point 1) but got (timestep 2, point 1001)")
#: the same damage seen by another consumer of (2, 1): whichever checks first may end the job
CORRUPTED_ANY = re.compile(
    r"Task Bench validation failed: graph 0 task \(timestep 3, point [012]\): input \d \(from point 1 at timestep 2\) "
    r"is corrupted: at pair 0 expected \(timestep 2, point 1\) but got \(timestep 2, point 1001\)"
)


def test_corrupted_output_fails_the_shoal_job_in_process():
    from shoal.bench.taskbench.systems import shoal_system

    app = parse("-type stencil_1d -width 4 -steps 5 --corrupt 2,1 --transport inproc -n 2".split())
    for api in ("entry", "channel", "set"):
        app.api = api
        with pytest.raises(ValidationError) as info:  # in-process jobs re-raise a PE's fatal error
            shoal_system.main(app, io.StringIO())
        assert "task (timestep 3, point" in str(info.value) and "but got (timestep 2, point 1001)" in str(info.value)


@pytest.mark.mpi
@pytest.mark.parametrize("system", [["--system", "mpi4py"], ["--system", "shoal", "--api", "entry"],
                                    ["--system", "shoal", "--api", "channel"], ["--system", "shoal", "--api", "set"],
                                    ["--system", "charm4py"], ["--system", "dask"]],
                         ids=["mpi4py", "shoal-entry", "shoal-channel", "shoal-set", "charm4py", "dask"])
def test_a_wrong_dependency_fails_loudly_on_every_system(system):
    package = {"charm4py": "charm4py", "dask": "distributed"}.get(system[1])
    if package and importlib.util.find_spec(package) is None:
        pytest.skip(f"{system[1]} is not installed")
    # the output of task (2, 1) is damaged after it is written; its consumer (3, 2) must say so
    proc = _taskbench("-n", "2", *system, "-type", "stencil_1d", "-width", "4", "-steps", "5", "--corrupt", "2,1")
    assert proc.returncode != 0
    assert CORRUPTED_ANY.search(proc.stderr), proc.stderr[-3000:]


@pytest.fixture(scope="module")
def ray_system():
    """The Ray system, with one local Ray instance shared by this module's Ray tests (startup takes seconds)."""
    pytest.importorskip("ray", reason="--system ray needs ray: pip install ray")
    from shoal.bench.taskbench.systems import ray_system

    with ray_system.instance(2):
        yield ray_system


def test_ray_runs_every_pattern_on_a_local_instance(ray_system):
    out = io.StringIO()
    assert ray_system.main(parse([*ALL_PATTERNS, "--system", "ray", "-n", "2"]), out) == 0
    _check_run(out.getvalue())


def test_a_wrong_dependency_fails_loudly_on_ray(ray_system):
    app = parse("--system ray -n 2 -type stencil_1d -width 4 -steps 5 --corrupt 2,1".split())
    with pytest.raises(ValidationError) as info:  # every consumer of the damaged output is named
        ray_system.main(app, io.StringIO())
    assert CORRUPTED in str(info.value)
    assert str(info.value).count("but got (timestep 2, point 1001)") == 3


def test_usage_errors_are_one_line():
    proc = _taskbench("--system", "nope")
    assert proc.returncode == 2 and "systems: shoal, mpi4py, charm4py, dask, ray" in proc.stderr
    proc = _taskbench("-type", "random_spread")
    assert proc.returncode == 2 and "never implemented" in proc.stderr
