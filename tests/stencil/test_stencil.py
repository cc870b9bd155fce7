"""The stencil DSL: exactness against NumPy, the seed's programs, loops, errors.

Programs run inside ``shoal.run`` on 1–3 in-process PEs (the same runtime code as
under MPI); tests marked ``mpi`` start real ``shoal run -n N`` jobs. Each program is
written once as a function of its fields, and run on stencil fields and on NumPy
arrays: the results must be equal bit for bit.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from support.commands import clean_env
from support import ROOT

from shoal.stencil import (
    CompilerError,
    GhostDepthError,
    GridBoundsError,
    ShapeError,
    Stencil,
    UnsupportedOperationError,
    norm,
    where,
)
from shoal.stencil.interface import decompose, tile_bounds
from shoal.stencil.nodes import Assign, Axis, Binary, Const, Read, digest, dumps, loads
from support.stencil_support import Grid, finish, grouped, program, run_on, same, start

EXAMPLES = ROOT / "examples"
HERE = os.path.abspath(__file__)


# -- nodes ----------------------------------------------------------------------------------
def test_text_form_round_trips_every_scalar_exactly():
    values = [0.1, -0.0, 1e-310, 1.7976931348623157e308, float("inf"), 1 / 3, 3, -7]
    for v in values:
        node = Binary("mul", Const(v), Read(0, (Axis(1, 1, 5), Axis(0, 1, 1, True))))
        back = loads(dumps(node))
        assert back == node
        assert dumps(back) == dumps(node)
        c = back.left
        assert type(c.value) is type(v) and (c.value == v) and (str(c.value) == str(v))
    assert Const(0.0) != Const(-0.0) and Const(1) != Const(1.0)
    assert loads(dumps(Const(0.25, "float32"))) == Const(0.25, "float32")


def test_statements_hash_structurally():
    a = Assign(Read(1, (Axis(1, 1, 4),)), Binary("add", Read(0, (Axis(0, 1, 4),)), Const(0.5)))
    b = loads(dumps(a))
    assert hash(a) == hash(b) and digest(dumps(a)) == digest(dumps(b))
    c = Assign(Read(1, (Axis(1, 1, 4),)), Binary("add", Read(0, (Axis(0, 1, 4),)), Const(0.25)))
    assert digest(dumps(a)) != digest(dumps(c))


# -- decomposition --------------------------------------------------------------------------
@pytest.mark.parametrize("shape, ntiles, ghost", [((10,), 3, 1), ((7, 50), 8, 2), ((5, 5, 5), 6, 1), ((3, 100), 4, 1)])
def test_decomposition_covers_the_grid_once(shape, ntiles, ghost):
    dims = decompose(shape, ntiles, ghost)
    seen = np.zeros(shape, int)
    for index in np.ndindex(*dims):
        lo, hi = tile_bounds(index, dims, shape)
        assert all(h - lo_ >= max(ghost, 1) for lo_, h in zip(lo, hi))
        seen[tuple(slice(a, b) for a, b in zip(lo, hi))] += 1
    assert (seen == 1).all()


# -- exactness ------------------------------------------------------------------------------
@pytest.mark.parametrize("pes", [1, 2, 3])
@pytest.mark.parametrize("shape", [(23,), (17, 13), (9, 7, 11)], ids=["1d", "2d", "3d"])
def test_program_is_bit_for_bit_numpy(pes, shape):
    def body():
        rng = np.random.default_rng(sum(shape))
        g, ref = start(shape, rng, ghost_depth=2, odf=2)
        for _ in range(3):
            program(g.u, g.v, g.w, len(shape))
            g.u, g.v = g.v, g.u
            program(ref["u"], ref["v"], ref["w"], len(shape))
            ref["u"], ref["v"] = ref["v"], ref["u"]
        return finish(g), ref

    with np.errstate(all="ignore"):
        got, ref = run_on(pes, body)
    for name in ref:
        assert same(got[name], ref[name]), name


@pytest.mark.parametrize("shape", [(37,), (21, 19), (9, 8, 13)], ids=["1d", "2d", "3d"])
def test_statement_groups_are_bit_for_bit_numpy(shape):
    def body():
        rng = np.random.default_rng(7)
        g, ref = start(shape, rng, odf=2)
        for _ in range(3):
            grouped(g.u, g.v, g.w, len(shape))
            g.u, g.v = g.v, g.u
            grouped(ref["u"], ref["v"], ref["w"], len(shape))
            ref["u"], ref["v"] = ref["v"], ref["u"]
        out = finish(g)
        return out, ref, [len(e.members) for e in g._rec.statements.values()]

    got, ref, members = run_on(2, body)
    assert 3 in members  # one loop nest for the three statements
    for name in ref:
        assert same(got[name], ref[name]), name


@pytest.mark.parametrize("backend", ["numpy", "c"])
def test_both_backends_and_multi_axis_tiles(backend, monkeypatch):
    """Faces of the inner axis are packed and unpacked by generated C with compiled
    kernels, by NumPy without: both give NumPy's bits."""
    import shoal.stencil.halo as halo

    loaded = []
    real = halo.load_copy
    monkeypatch.setattr(halo, "load_copy", lambda *a: loaded.append(a) or real(*a))
    shape = (6, 30)  # 2 PEs x odf 3 = 6 tiles: 3 along axis 0, 2 along axis 1

    def body():
        rng = np.random.default_rng(1)
        g, ref = start(shape, rng, ghost_depth=2, odf=3, backend=backend)
        assert g.backend == backend
        assert "3 x 2" in g.describe()
        with np.errstate(all="ignore"):
            for _ in range(2):
                program(g.u, g.v, g.w, 2)
                program(ref["u"], ref["v"], ref["w"], 2)
        return finish(g), ref

    got, ref = run_on(2, body)
    for name in ref:
        assert same(got[name], ref[name]), name
    assert bool(loaded) == (backend == "c")
    assert {dt for _, dt, _ in loaded} <= {"float64", "float32"}


def test_where_of_integer_scalars_is_numpy_s():
    """where() with a NumPy integer scalar: the Python number beside it counts as what it
    is (NEP 50: float64 with 0.5, int64 with 2), and the values reach float32 and float64
    fields as NumPy stores them (found by the random-statement property test)."""

    def body():
        rng = np.random.default_rng(5)
        g, arrays = start((9, 7), rng)
        u, w = g.u, g.w
        for _ in range(2):
            u[1:-1, 1:-1] = where(u[1:-1, 1:-1] < 0.0, np.absolute(-3), 0.5) + where(u[1:-1, 1:-1] > 1.0, np.int64(3), 2)
            w[1:-1, 1:-1] = where(w[1:-1, 1:-1] < 0.0, np.int64(-4), w[1:-1, 1:-1])
        a, b = arrays["u"], arrays["w"]
        for _ in range(2):
            a[1:-1, 1:-1] = np.where(a[1:-1, 1:-1] < 0.0, np.absolute(-3), 0.5) + np.where(a[1:-1, 1:-1] > 1.0, np.int64(3), 2)
            b[1:-1, 1:-1] = np.where(b[1:-1, 1:-1] < 0.0, np.int64(-4), b[1:-1, 1:-1])
        got = finish(g)
        return same(got["u"], a) and same(got["w"], b)

    assert run_on(2, body)


def test_fields_start_as_zeros_and_values_come_back():
    def body():
        g = Grid((5, 4))
        zeros = g.u.to_numpy()
        a = np.arange(20.0).reshape(5, 4)
        g.v.from_numpy(a)
        g.u[...] = g.v * 2
        return zeros, g.u.to_numpy(), g.w.to_numpy().dtype, g.v.sum().get(), g.v.max().get(), norm(g.v).get()

    zeros, doubled, wdt, s, m, n2 = run_on(2, body)
    assert (zeros == 0).all() and same(doubled, np.arange(20.0).reshape(5, 4) * 2)
    assert wdt == np.float32 and s == 190.0 and m == 19.0
    assert n2 == pytest.approx(np.linalg.norm(np.arange(20.0)))


def test_inplace_operators_and_whole_field_arithmetic():
    def body():
        g = Grid((8,))
        g.u.from_numpy(np.linspace(0, 1, 8))
        g.u += 1
        g.u *= g.u
        g.v[...] = -g.u / 3
        return g.u.to_numpy(), g.v.to_numpy()

    u, v = run_on(1, body)
    ref = np.linspace(0, 1, 8)
    ref += 1
    ref *= ref
    assert same(u, ref) and same(v, -ref / 3)


# -- the seed's programs --------------------------------------------------------------------
def run_script(name, *args, pes=None, env_extra=None, timeout=120):
    env = clean_env()
    env.update(env_extra or {})
    if pes is None:
        cmd = [sys.executable, str(EXAMPLES / name), *args]
    else:
        cmd = [sys.executable, "-m", "shoal", "run", "-n", str(pes), str(EXAMPLES / name), *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env, cwd=ROOT)


def assert_ok(proc, expected):
    report = f"exit {proc.returncode}\n--- stdout\n{proc.stdout}\n--- stderr\n{proc.stderr}"
    assert proc.returncode == 0, report
    assert proc.stdout.strip().splitlines()[-1].startswith(expected), report


def test_fig4_program_plain_python():
    assert_ok(run_script("stencil_jacobi2d.py", "34", "300"), "stencil_jacobi2d: OK")


def test_fig4_program_three_inproc_pes():
    assert_ok(run_script("stencil_jacobi2d.py", "31", "200", env_extra={"SHOAL_PES": "3"}), "stencil_jacobi2d: OK")


EXAMPLE_CASES = [
    ("stencil_jacobi2d.py", ("50", "400"), "stencil_jacobi2d: OK"),
    ("stencil_heat.py", (), "stencil_heat: OK"),
    ("stencil_laplace3d.py", (), "stencil_laplace3d: OK"),
    ("stencil_burgers.py", (), "stencil_burgers: OK"),
]


@pytest.mark.parametrize("name, args, expected", EXAMPLE_CASES, ids=[c[0][:-3] for c in EXAMPLE_CASES])
def test_examples_in_process(name, args, expected):
    assert_ok(run_script(name, *args, env_extra={"SHOAL_PES": "2"}), expected)


@pytest.mark.mpi
@pytest.mark.parametrize("pes", [2, 3])
@pytest.mark.parametrize("name, args, expected", EXAMPLE_CASES, ids=[c[0][:-3] for c in EXAMPLE_CASES])
def test_examples_under_mpiexec(name, args, expected, pes):
    assert_ok(run_script(name, *args, pes=pes), expected)


# -- loops and convergence ------------------------------------------------------------------
class Heat(Stencil):
    fields = ("u", "v")

    def step(self):
        self.v[1:-1] = self.u[1:-1] + 0.3 * (self.u[:-2] - 2 * self.u[1:-1] + self.u[2:])
        self.u, self.v = self.v, self.u


def heat_numpy(u, steps, tol=None, check_every=1):
    v = u.copy()
    done = steps
    for k in range(1, steps + 1):
        v[1:-1] = u[1:-1] + 0.3 * (u[:-2] - 2 * u[1:-1] + u[2:])
        u, v = v, u
        if tol is not None and k % check_every == 0 and np.max(np.abs(u - v)) < tol:
            done = k
            break
    return u, done


@pytest.mark.parametrize("pes", [1, 3])
@pytest.mark.parametrize("steps, tol, every", [(7, None, 1), (400, None, 1), (5000, 1e-3, 1), (5000, 1e-3, 4)])
def test_backend_loop_with_convergence(pes, steps, tol, every):
    u0 = np.sin(np.linspace(0, 3, 41)) + np.linspace(0, 1, 41) ** 2

    def body():
        h = Heat((41,), odf=2)
        h.u.from_numpy(u0)
        h.v.from_numpy(u0)
        until = (lambda: norm(h.u - h.v, np.inf) < tol) if tol else None
        n = h.solve(steps=steps, until=until, check_every=every)
        return n, h.u.to_numpy(), h.solve_mode

    n, u, mode = run_on(pes, body)
    want, k = heat_numpy(u0.copy(), steps, tol, every)
    assert n == k and same(u, want)
    assert mode == "loop"  # the body (two steps: the fields swap) repeats


class HeatIterate(Stencil):
    def __init__(self, n, freq):
        self.u, self.v = self.initialize(n, backend_freq=freq, num_fields=2, odf=2)
        self.count = 0

    def iterate(self, nsteps):
        self.v[1:-1] = self.u[1:-1] + 0.3 * (self.u[:-2] - 2 * self.u[1:-1] + self.u[2:])
        self.u, self.v = self.v, self.u
        self.count += 1
        return self.count < nsteps


@pytest.mark.parametrize("freq", [1, 7, 100])
def test_iterate_style_convergence_stops_on_the_backend(freq):
    u0 = np.sin(np.linspace(0, 3, 41)) + np.linspace(0, 1, 41) ** 2

    def body():
        h = HeatIterate(41, freq) if False else HeatIterate((41,), freq)
        h.u.from_numpy(u0)
        h.v.from_numpy(u0)
        n = h.solve(5000, until=lambda: norm(h.u - h.v, np.inf) < 1e-3)
        return n, h.u.to_numpy()

    n, u = run_on(2, body)
    want, k = heat_numpy(u0.copy(), 5000, 1e-3)
    assert n == k and same(u, want)


# -- errors, at the user's line ------------------------------------------------------------
def line_of(text):
    for i, line in enumerate(Path(HERE).read_text().splitlines(), 1):
        if text in line and "line_of(" not in line:
            return i
    raise AssertionError(text)


def raises_here(exc_type, fn, marker):
    def body():
        with pytest.raises(exc_type) as info:
            fn()
        return str(info.value)

    message = run_on(1, body)
    assert f"{HERE}:{line_of(marker)}:" in message, message
    return message


def test_shape_mismatch_names_the_line():
    def bad():
        g = Grid((10, 10))
        g.v[1:-1, 1:-1] = g.u[1:, 1:-1]  # MARK-shape-assign

    msg = raises_here(ShapeError, bad, "MARK-shape-assign")
    assert "(9, 8)" in msg and "(8, 8)" in msg

    def bad_op():
        g = Grid((10, 10))
        g.v[...] = g.u[1:, :] + g.u[:-2, :]  # MARK-shape-op

    raises_here(ShapeError, bad_op, "MARK-shape-op")


def test_index_outside_the_grid():
    def bad():
        g = Grid((10, 10))
        g.v[10, :] = 1.0  # MARK-bounds

    assert "index 10" in raises_here(GridBoundsError, bad, "MARK-bounds")

    def too_many():
        g = Grid((10,))
        g.u[1, 2] = 0.0  # MARK-too-many

    raises_here(GridBoundsError, too_many, "MARK-too-many")


def test_ghost_read_deeper_than_ghost_depth():
    def bad():
        g = Grid((20,), ghost_depth=1)
        g.v[2:-2] = g.u[:-4] + g.u[4:]  # MARK-ghost

    msg = raises_here(GhostDepthError, bad, "MARK-ghost")
    assert "ghost_depth=2" in msg and "offset -2" in msg


@pytest.mark.parametrize("what", ["tan", "floordiv", "transpose", "step", "array", "truth", "matmul"])
def test_unsupported_operations_are_named(what):
    def bad():
        g = Grid((10, 10))
        if what == "tan":
            g.v[...] = np.tan(g.u)  # MARK-unsupported-tan
        elif what == "floordiv":
            g.v[...] = g.u // 2  # MARK-unsupported-floordiv
        elif what == "transpose":
            g.v[0, :] = g.u[:, 0]  # MARK-unsupported-transpose
        elif what == "step":
            g.v[0:5, :] = g.u[0:10:2, :]  # MARK-unsupported-step
        elif what == "array":
            g.v[...] = g.u + np.ones((10, 10))  # MARK-unsupported-array
        elif what == "truth":
            if g.u[0, 0] > 1:  # MARK-unsupported-truth
                pass
        elif what == "matmul":
            g.v[...] = g.u @ g.u  # MARK-unsupported-matmul

    msg = raises_here(UnsupportedOperationError, bad, f"MARK-unsupported-{what}")
    words = {"tan": "np.tan", "floordiv": "'//'", "transpose": "grid axes", "step": "step 2",
             "array": "from_numpy", "truth": "truth value", "matmul": "'@'"}
    assert words[what] in msg


def test_compiler_failure_reports_message_and_keeps_source(tmp_path, monkeypatch):
    monkeypatch.setenv("SHOAL_CACHE_DIR", str(tmp_path))

    def bad():
        g = Grid((10,), cflags=("-fno-such-option-exists",))
        g.v[1:-1] = g.u[:-2] * 3.0  # MARK-compiler

    msg = raises_here(CompilerError, bad, "MARK-compiler")
    assert "-fno-such-option-exists" in msg and "generated source saved in" in msg
    saved = Path(msg.split("generated source saved in ")[1].split()[0])
    assert saved.exists() and "shoal_kernel" in saved.read_text()


def test_without_a_compiler_numpy_runs_and_says_so(monkeypatch):
    from shoal import compiler

    monkeypatch.setitem(compiler._found, "cc", None)  # as on a machine without one

    def body():
        g = Grid((12,))
        g.u[1:-1] = g.v[:-2] + 1.0
        return g.backend, g.describe(), g.u.to_numpy()

    with pytest.warns(RuntimeWarning, match="no C compiler found"):
        backend, text, u = run_on(1, body)
    assert backend == "numpy" and "NumPy" in text
    assert same(u, np.r_[0.0, np.ones(10), 0.0])


def test_errors_in_a_script_point_at_the_script(tmp_path):
    prog = tmp_path / "bad.py"
    prog.write_text(
        "from shoal.stencil import Stencil\n"
        "class G(Stencil):\n"
        "    fields = ('a', 'b')\n"
        "g = G((8, 8))\n"
        "g.a[1:-1, 1:-1] = g.b[:-3, 1:-1]\n"
    )
    env = clean_env()
    proc = subprocess.run([sys.executable, str(prog)], capture_output=True, text=True, timeout=60, env=env)
    assert proc.returncode != 0
    assert f"{prog}:5: shape mismatch" in proc.stderr


def test_exchange_ghosts_accepts_only_fields_of_the_stencil():
    def body():
        g, h = Grid((8,)), Grid((8,))
        g.exchange_ghosts(g.u, g.v)  # accepted
        g.v[1:-1] = g.u[:-2]
        with pytest.raises(TypeError, match="fields of this stencil"):
            g.exchange_ghosts(h.u)
        with pytest.raises(TypeError, match="fields of this stencil"):
            g.exchange_ghosts(g.u[1:])
        return g.v.to_numpy()

    assert same(run_on(2, body), np.zeros(8))


@pytest.mark.mpi
def test_an_error_in_a_script_ends_the_mpi_job(tmp_path):
    prog = tmp_path / "bad.py"
    prog.write_text(
        "from shoal.stencil import Stencil\n"
        "class G(Stencil):\n"
        "    fields = ('a', 'b')\n"
        "g = G((8, 8))\n"
        "g.a[1:-1, 1:-1] = g.b[:-2, 1:-1] + 1\n"
        "print('first', g.a.to_numpy().sum())\n"
        "g.a[1:-1, 1:-1] = g.b[:-3, 1:-1]\n"
    )
    env = clean_env()
    proc = subprocess.run([sys.executable, "-m", "shoal", "run", "-n", "2", str(prog)],
                          capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode != 0
    assert "first 36.0" in proc.stdout
    assert f"{prog}:7: shape mismatch" in proc.stderr


@pytest.mark.mpi
@pytest.mark.parametrize("pes", [2, 3])
def test_every_operation_under_mpiexec(tmp_path, pes):
    """The all-operations program of the in-process tests, as a script on real MPI ranks."""
    import inspect

    prog = tmp_path / "ops.py"
    prog.write_text(
        "import sys\nimport numpy as np\n"
        "from shoal.stencil import Stencil, where, minimum, maximum, sqrt\n"
        + inspect.getsource(program)
        + "class Grid(Stencil):\n    fields = {'u': 'float64', 'v': 'float64', 'w': 'float32'}\n"
        "ok = True\n"
        "for shape in [(23,), (17, 13), (9, 7, 11), (6, 40)]:  # (6, 40): 2 x 2 tiles, inner-axis faces\n"
        "    rng = np.random.default_rng(sum(shape))\n"
        "    ref = {'u': rng.standard_normal(shape), 'v': rng.standard_normal(shape),\n"
        "           'w': rng.standard_normal(shape).astype(np.float32)}\n"
        "    g = Grid(shape, ghost_depth=2, odf=2)\n"
        "    for k, a in ref.items():\n"
        "        getattr(g, k).from_numpy(a)\n"
        "    with np.errstate(all='ignore'):\n"
        "        for _ in range(2):\n"
        "            program(g.u, g.v, g.w, len(shape))\n"
        "            program(ref['u'], ref['v'], ref['w'], len(shape))\n"
        "    for k in ref:\n"
        "        ok = ok and np.array_equal(getattr(g, k).to_numpy(), ref[k], equal_nan=True)\n"
        "print('ops: OK' if ok else 'ops: FAIL')\n"
        "sys.exit(0 if ok else 1)\n"
    )
    env = clean_env()
    proc = subprocess.run([sys.executable, "-m", "shoal", "run", "-n", str(pes), str(prog)],
                          capture_output=True, text=True, timeout=180, env=env)
    assert proc.returncode == 0 and "ops: OK" in proc.stdout, proc.stdout + proc.stderr


def test_frontend_pe_can_be_kept_free_of_tiles():
    def body():
        g = Grid((29, 6), odf=2, frontend_tiles=False)
        where = g._handle.tiles.location(ret=True).get()
        rng = np.random.default_rng(5)
        a = rng.standard_normal((29, 6))
        g.u.from_numpy(a)
        g.v[1:-1, 1:-1] = 0.25 * (g.u[:-2, 1:-1] + g.u[2:, 1:-1] + g.u[1:-1, :-2] + g.u[1:-1, 2:])
        return where, g.describe(), g.v.to_numpy(), a

    where, text, v, a = run_on(3, body)
    assert sorted({pe for _, pe, _, _ in where}) == [1, 2] and len(where) == 4
    assert "PE 0 runs the frontend only" in text
    want = np.zeros_like(a)
    want[1:-1, 1:-1] = 0.25 * (a[:-2, 1:-1] + a[2:, 1:-1] + a[1:-1, :-2] + a[1:-1, 2:])
    assert same(v, want)


def test_device_cuda_without_a_gpu_fails_clearly():
    from shoal.stencil import DeviceError
    from shoal.stencil.cuda import cuda_status

    why = cuda_status()
    if why is None:
        pytest.skip("a CUDA device is present")

    def body():
        with pytest.raises(DeviceError) as info:
            Grid((8, 8), device="cuda")
        with pytest.raises(ValueError, match="device='gpu'"):
            Grid((8, 8), device="gpu")
        return str(info.value)

    text = run_on(1, body)
    assert "device='cuda' cannot run here: " + why in text and "device='cpu'" in text
    assert text.startswith(HERE + ":") or "test_stencil.py:" in text


