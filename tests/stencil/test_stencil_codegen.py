"""The stencil DSL's generated code: halo pack/unpack, tile layout, vectorization,
fast-math, the CUDA printer, and the kernel cache."""

from __future__ import annotations

import os
import subprocess

import numpy as np
import pytest

from shoal.compiler import find_cc
from shoal.stencil import norm
from shoal.stencil.nodes import Assign, Axis, Binary, Const, Read, Unary
from support.stencil_support import Grid, grouped, program, run_on, same, start

HERE = os.path.abspath(__file__)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("shape", [(13,), (7, 9), (5, 6, 7)])
def test_generated_pack_and_unpack_copy_a_face(dtype, shape):
    from shoal.stencil.layout import aligned
    from shoal.stencil.build import load_copy

    if find_cc() is None:
        pytest.skip("no C compiler")
    import ctypes

    raw, a = aligned(shape, dtype, 2)
    a[...] = np.random.default_rng(3).standard_normal(shape)
    strides = (ctypes.c_long * len(shape))(*(s // a.itemsize for s in a.strides))
    pack, unpack = load_copy(len(shape), dtype)
    L = ctypes.c_long * len(shape)
    # a thin face of the contiguous axis (its own loop order), and a face of the axis before
    for ax in {len(shape) - 1, max(0, len(shape) - 2)}:
        b, n = [0] * len(shape), list(shape)
        b[ax], n[ax] = 1, 2
        idx = tuple(slice(x, x + k) for x, k in zip(b, n))
        buf = np.empty(n, dtype)
        pack(a.ctypes.data, buf.ctypes.data, L(*b), L(*n), strides)
        assert same(buf, a[idx].copy())
        before = a.copy()
        twice = buf * 2
        unpack(a.ctypes.data, twice.ctypes.data, L(*b), L(*n), strides)
        before[idx] *= 2
        assert same(a, before)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("shape", [(13,), (7, 9), (5, 6, 7)])
def test_tile_rows_start_a_chosen_column_on_a_cache_line(dtype, shape):
    from shoal.stencil.layout import aligned, first_written

    for column in (0, 1, 2, 4):
        raw, a = aligned(shape, dtype, column)
        assert a.shape == shape and a.dtype == dtype and not a.any()
        assert raw.flags.c_contiguous and a.base is not None
        assert a.ctypes.data % 64 == (-column * a.itemsize) % 64
        if len(shape) > 1:
            assert a.strides[-2] % 64 == 0 and a.strides[-2] // a.itemsize == raw.shape[-1]
    # ``u[1:-1] = ...`` with ghost 1 starts its rows at global column 1: local 2 in the
    # first tile of the axis; other tiles align their first owned point
    assert first_written(0, 100, 1) == 2 and first_written(0, 100, 2) == 4
    assert first_written(50, 100, 1) == 1 and first_written(0, 1, 1) == 1


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("shape", [(6, 8), (5, 4, 10), (4, 19), (3, 8192)])
def test_tiles_spanning_the_last_axis_keep_whole_rows(dtype, shape):
    """A tile that spans the last axis stores owned points only per row (64 KiB rows for
    8192 doubles); its ghost columns alias the neighbouring rows' ends and are never
    touched, and the first written column still starts a cache line."""
    from shoal.stencil.layout import whole_rows

    for g in (1, 2):
        local = tuple(n + 2 * g for n in shape)
        raw, v = whole_rows(local, dtype, 2 * g, g)
        owned = (slice(g, -g),) * len(shape)
        ref = np.arange(np.prod(shape)).reshape(shape).astype(dtype)
        v[owned] = ref
        assert v.shape == local and same(v[owned], ref)
        assert raw.shape[-1] == -(-shape[-1] // 16) * 16 and raw.flags.c_contiguous
        assert v.strides[:-1] == raw.strides[:-1] and v.strides[-1] == v.itemsize
        assert (v.ctypes.data + 2 * g * v.itemsize) % 64 == 0
        assert same(raw[(slice(g, -g),) * (len(shape) - 1) + (slice(0, shape[-1]),)], ref)  # rows: owned only


# -- code generation ------------------------------------------------------------------------
def test_jacobi_kernel_inner_loop_is_vectorized(tmp_path):
    """GCC must vectorize the contiguous inner loop (without care it stays scalar)."""
    from shoal.stencil.analysis import analyze
    from shoal.stencil.build import BASE_FLAGS
    from shoal.stencil.indexing import index_axes
    from shoal.stencil.lowering import lower_statement
    from shoal.stencil.printer_c import print_kernel

    cc = find_cc()
    version = subprocess.run([cc, "--version"], capture_output=True, text=True).stdout if cc else ""
    if not cc or "gcc" not in version.lower() and "free software foundation" not in version.lower():
        pytest.skip("needs GCC for -fopt-info-vec")
    shape = (64, 64)
    x = lambda *i: Read(0, index_axes(i, shape, "x"))  # noqa: E731
    value = Binary("mul", Const(0.25), Binary("add", Binary("add", Binary("add",
                   x(slice(None, -2), slice(1, -1)), x(slice(2, None), slice(1, -1))),
                   x(slice(1, -1), slice(None, -2))), x(slice(1, -1), slice(2, None))))
    stmt = Assign(Read(1, index_axes((slice(1, -1), slice(1, -1)), shape, "y")), value)
    info = analyze(stmt, ["float64", "float64"], ["x", "y"], 1)
    source = print_kernel(lower_statement(stmt, info, ["float64", "float64"]).kernel)
    src = tmp_path / "k.c"
    src.write_text(source)
    proc = subprocess.run([cc, *BASE_FLAGS, "-fopt-info-vec-optimized", str(src), "-o", str(tmp_path / "k.so")],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "loop vectorized" in proc.stderr, proc.stderr
    assert "-ffp-contract=off" in BASE_FLAGS and "-ffast-math" not in BASE_FLAGS
    assert "restrict" in source and "0x1.0000000000000p-2" in source


def test_fast_math_is_opt_in_and_compiles_libm_calls():
    def body():
        g = Grid((40,), fast_math=True)
        g.u.from_numpy(np.linspace(-1, 1, 40))
        g.v[...] = np.exp(g.u) * 2.0
        entry = next(e for e in g._rec.statements.values() if e.stmt.target.field == 1)
        return entry.source, g.v.to_numpy()

    source, v = run_on(2, body)
    assert source is not None and "exp(" in source  # compiled (not the NumPy evaluator)
    assert np.allclose(v, np.exp(np.linspace(-1, 1, 40)) * 2.0, rtol=1e-14)


# -- CUDA target ------------------------------------------------------------------------------
def test_cuda_printer_output_compiles_with_nvcc(tmp_path, monkeypatch):
    """Every kernel shape a program produces (statement groups, aliased statements with a
    scratch box, strided boxes, float32, 1-3 axes, every reduction) prints as CUDA that
    nvcc compiles with --fmad=false, and the PTX has no fused multiply-add. Compile-tested
    only: this machine has no GPU."""
    from concurrent.futures import ThreadPoolExecutor

    from shoal.compiler import find_nvcc
    from shoal.stencil.build import CUDA_FLAGS, compile_kernel
    from shoal.stencil.printer_cuda import print_cuda_kernel

    nvcc = find_nvcc()
    if nvcc is None:
        pytest.skip("nvcc is not installed")
    monkeypatch.setenv("SHOAL_CACHE_DIR", str(tmp_path / "cache"))

    kernels = _cuda_kernels()
    assert any(k.more for k in kernels) and any(k.scratch for k in kernels) and any(k.reduce for k in kernels)
    assert {k.ndim for k in kernels} == {1, 2, 3} and any(max(k.steps) > 1 for k in kernels)
    sources = [print_cuda_kernel(k, f"kernel {i}") for i, k in enumerate(kernels)]
    with ThreadPoolExecutor(2) as pool:
        paths = list(pool.map(lambda src: compile_kernel(src, device="cuda"), sources))
    assert all(p.exists() and p.suffix == ".so" for p in paths)
    assert "--fmad=false" in CUDA_FLAGS and "--use_fast_math" not in CUDA_FLAGS
    src = tmp_path / "burgers.cu"
    src.write_text(next(s for s, k in zip(sources, kernels) if k.more))
    ptx = tmp_path / "burgers.ptx"
    flags = [f for f in CUDA_FLAGS if f not in ("-Xcompiler", "-fPIC", "-shared", "-cudart", "shared")]
    proc = subprocess.run([nvcc, *flags, "--ptx", str(src), "-o", str(ptx)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    text = ptx.read_text()
    assert "mul.rn.f" in text and "fma." not in text and "mad." not in text


def _cuda_kernels():
    """Lowered kernels of every shape the test programs produce, on 1-3 axes."""

    def body():
        kernels = []
        for shape in [(23,), (17, 13), (9, 7, 11)]:
            g, _ = start(shape, np.random.default_rng(0), ghost_depth=2)
            with np.errstate(all="ignore"):
                program(g.u, g.v, g.w, len(shape))
                grouped(g.u, g.v, g.w, len(shape))
                for r in (norm(g.u - g.v), norm(g.u - g.v, np.inf), g.w.sum(), g.u.max(), g.v.min()):
                    r.get()
            kernels += [e.lowered.kernel for e in g._rec.statements.values() if e.source is not None]
            kernels += [e.lowered.kernel for e in g._rec.reductions.values() if e.source is not None]
        return kernels

    return run_on(1, body)


def test_cuda_kernels_compute_what_the_c_kernels_do_emulated_on_the_cpu():
    """The CUDA printer's thread mapping, scratch copy-back, groups, strides and
    reductions, run thread by thread on the CPU (cuda_emulator), give the C kernels'
    bits on the same arrays; also with a grid too small for the box (cap), where
    threads loop. Sums may differ from C's in the last bits (another order)."""
    from support.cuda_emulator import emulated
    from shoal.stencil.build import load_kernel
    from shoal.stencil.printer_c import print_kernel
    from shoal.stencil.printer_cuda import print_cuda_kernel
    import ctypes

    if find_cc() is None:
        pytest.skip("no C compiler")
    chosen = {}
    for k in _cuda_kernels():  # a few of each kind per number of axes (each is two compiles)
        kind = (k.ndim, k.reduce or ("scratch" if k.scratch else "group" if k.more else
                                     "strided" if max(k.steps) > 1 else "plain"))
        chosen.setdefault(kind, k)
    assert {kind for _, kind in chosen} >= {"plain", "scratch", "group", "strided", "max", "sumsq", "sum", "min"}
    rng = np.random.default_rng(11)
    L = ctypes.c_long
    for (d, kind), k in sorted(chosen.items(), key=lambda item: str(item[0])):
        cpu = load_kernel(print_kernel(k), k.reduce is not None)
        emu = emulated(print_cuda_kernel(k), d, k.reduce is not None)
        sizes = [[5, 7, 9][:d]] + ([[3, 2, 600][-d:]] if k.reduce else [])
        for n in sizes:
            b = [4] * d
            shape = [bb + st * nn + 4 for bb, st, nn in zip(b, k.steps, n)]
            start_arrays = [rng.standard_normal(shape).astype(dt) for dt in k.slots]
            strides = (L * d)(*(s // start_arrays[0].itemsize for s in start_arrays[0].strides))
            runs = []
            for who, cap in (("c", None), ("cuda", 0), ("cuda", 2), ("cuda", 1)):
                arrays = [a.copy() for a in start_arrays]
                ptr_list = [a.ctypes.data for a in arrays]
                if k.scratch:
                    scratch = np.zeros(int(np.prod(n)), k.target_dtype)
                    ptr_list.append(scratch.ctypes.data)
                ptrs = (ctypes.c_void_p * len(ptr_list))(*ptr_list)
                args = (ptrs, (L * d)(*b), (L * d)(*n), strides)
                with np.errstate(all="ignore"):
                    value = cpu(*args) if who == "c" else emu(*args, cap)
                runs.append((value, arrays))
            (want, want_arrays), *others = runs
            for cap, (value, arrays) in zip((0, 2, 1), others):
                where = f"{d}-d {kind} kernel, box {n}, cap {cap}"
                for got_a, want_a in zip(arrays, want_arrays):
                    assert same(got_a, want_a), where
                if k.reduce in ("sum", "sumsq"):
                    assert np.isclose(value, want, rtol=1e-12, atol=0), where
                elif k.reduce is not None:
                    assert value == want or (np.isnan(value) and np.isnan(want)), where


def test_cuda_keeps_inexact_functions_on_numpy():
    from shoal.stencil.analysis import numpy_only_reason

    x = Read(0, (Axis(0, 1, 4, False),))
    for op in ("sin", "cos"):
        node = Unary(op, x)
        assert numpy_only_reason(node, ["float64"]) is None  # glibc's, as NumPy's
        assert numpy_only_reason(node, ["float64"], device="cuda") == f"{op} on float64"
    assert numpy_only_reason(Unary("sqrt", x), ["float64"], device="cuda") is None  # IEEE on both


# -- the kernel cache ---------------------------------------------------------------------------
def test_kernel_cache_evicts_least_recently_used(tmp_path, monkeypatch):
    from shoal.stencil import build

    monkeypatch.setenv("SHOAL_CACHE_DIR", str(tmp_path))
    folder = tmp_path / "stencil"
    folder.mkdir()
    for i, key in enumerate(["old", "mid", "new"]):
        for ext in (".so", ".c", ".lock"):
            (folder / (key + ext)).write_bytes(b"x" * (1000 if ext == ".so" else 10))
        os.utime(folder / f"{key}.so", (1000 + i, 1000 + i))
    (folder / "gone.123.tmp.so").write_bytes(b"x" * 5)  # a killed compile's leftover
    os.utime(folder / "gone.123.tmp.so", (10, 10))
    assert build.cache_usage() == (4, 3 * 1020 + 5)
    assert build.prune_cache(limit=2100, keep_recent=0) == (2, 1025)
    assert sorted(p.name for p in folder.iterdir()) == ["mid.c", "mid.lock", "mid.so", "new.c", "new.lock", "new.so"]
    os.utime(folder / "new.so")  # used just now: the automatic bound spares it
    assert build.prune_cache(limit=0) == (1, 1020)
    assert build.clear_cache() == (1, 1020) and not any(folder.iterdir())


def test_kernel_cache_marks_use_and_rebuilds_an_evicted_object(tmp_path, monkeypatch):
    from shoal.stencil import build

    if find_cc() is None:
        pytest.skip("no C compiler")
    monkeypatch.setenv("SHOAL_CACHE_DIR", str(tmp_path))
    source = "double shoal_reduce(void **p, const long *b, const long *n, const long *s) { return 42.0; }\n"
    path = build.compile_kernel(source)
    os.utime(path, (1000, 1000))
    lib = build._open(source, False, (), "", "cpu")
    assert path.stat().st_mtime > 1000 and lib.shoal_reduce  # marked used
    assert build.clear_cache()[0] == 1 and not path.exists()
    assert build._open(source, False, (), "", "cpu").shoal_reduce and path.exists()  # rebuilt


def test_shoal_cache_command(tmp_path, monkeypatch, capsys):
    from shoal.cli import main

    monkeypatch.setenv("SHOAL_CACHE_DIR", str(tmp_path))
    (tmp_path / "stencil").mkdir()
    (tmp_path / "stencil" / "k.so").write_bytes(b"x" * 2048)
    assert main(["cache"]) == 0
    assert "1 kernels" in capsys.readouterr().out
    assert main(["cache", "prune", "--max-mb", "1"]) == 0
    assert "removed 0" in capsys.readouterr().out
    assert main(["cache", "clear"]) == 0
    out = capsys.readouterr().out
    assert "removed 1 kernels" in out and "0 kernels" in out


def test_cache_bound_comes_from_the_environment():
    import subprocess
    import sys

    code = "from shoal.stencil.build import cache_limit; print(cache_limit())"
    run = lambda value: subprocess.run(  # noqa: E731
        [sys.executable, "-c", code], capture_output=True, text=True, env={**os.environ, "SHOAL_CACHE_MAX_MB": value}
    )
    assert run("64").stdout.strip() == str(64 << 20)
    bad = run("lots")
    assert bad.returncode != 0 and "SHOAL_CACHE_MAX_MB='lots' is not a size in megabytes" in bad.stderr


def test_device_cuda_plumbing_up_to_the_launch(monkeypatch):
    """A device with CUDA kernels whose tiles are resident in host memory: a stencil
    records CUDA kernels (nvcc compiles them), allocates its tiles through the device's
    memory, and calls the launch with the pointers and the stream, which on this
    GPU-less machine fails with a DeviceError naming the PE, the statement and the
    CUDA runtime's message."""
    from shoal.stencil import DeviceError, devices
    from shoal.compiler import find_nvcc
    from shoal.stencil.cuda import cuda_status
    from shoal.stencil.memory import HostMemory

    if find_nvcc() is None:
        pytest.skip("needs nvcc")
    if cuda_status() is None:
        pytest.skip("a CUDA device is present: the real path runs instead")
    allocated = []
    streams = []

    class OnHost(HostMemory):
        resident = True
        kernel_args = (0,)  # the default stream
        reduce_args = (0, 0)

        def zeros(self, count, dtype):
            allocated.append(dtype)
            return super().zeros(count, dtype)

        def note(self, where):
            streams.append(where)

    monkeypatch.setitem(devices._DEVICES, "cuda-on-host", devices.Device("cuda-on-host", "cuda", OnHost, lambda: None))
    seen = {}

    def body():
        g = Grid((16, 8), device="cuda-on-host")
        g.v[1:-1, :] = g.u[2:, :] + g.u[:-2, :]  # the marker line
        seen["sources"] = [e.source for e in g._rec.statements.values()]
        seen["describe"] = g.describe()
        g.v.to_numpy()

    with pytest.raises(DeviceError) as info:
        run_on(1, body)
    assert allocated == ["float64", "float64", "float32"]
    assert all("__global__ void shoal_body" in src and "void *stream" in src for src in seen["sources"])
    assert "CUDA kernels" in seen["describe"]
    assert len(streams) == 1 and "the marker line" in streams[0]  # noted before the launch
    message = str(info.value)
    assert message.startswith("PE 0: ") and "CUDA error in a generated kernel" in message, message
    assert "the marker line" in message, message

    def reduction():
        g = Grid((16, 8), device="cuda-on-host")
        return g.u.max().get()  # a reduction's launch: the stream and the partials buffer

    with pytest.raises(DeviceError, match="PE 0: .*CUDA error in a generated kernel"):
        run_on(1, reduction)
