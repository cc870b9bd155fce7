"""Stencil programs run on a device and on NumPy, compared bit for bit: written once, run
by the simulated device on the CPU (test_stencil_device.py) and by CUDA on a GPU
(test_stencil_cuda.py), in-process or as the main program of an MPI job.

:func:`run_checks` returns the differences it found (empty: all equal), so a job can
print them and exit non-zero.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from support.stencil_support import finish, grouped, program, same, start

from shoal.stencil import Stencil, maximum_of, minimum_of, norm, total

__all__ = ["run_checks", "checks_program", "SHAPES"]

#: a 1-d, a 2-d and a 3-d grid; (6, 40) splits along both axes on 4 tiles (inner-axis faces, corners)
SHAPES = [(23,), (17, 13), (9, 7, 11), (6, 40)]


class Jacobi(Stencil):
    fields = ("x", "y")

    def step(self):
        x, y = self.x, self.y
        y[1:-1, 1:-1] = 0.25 * (x[:-2, 1:-1] + x[2:, 1:-1] + x[1:-1, :-2] + x[1:-1, 2:])
        self.x, self.y = y, x


def _jacobi_numpy(x, steps, tol, every):
    y = x.copy()
    done = steps
    for k in range(1, steps + 1):
        y[1:-1, 1:-1] = 0.25 * (x[:-2, 1:-1] + x[2:, 1:-1] + x[1:-1, :-2] + x[1:-1, 2:])
        x, y = y, x
        if k % every == 0 and np.max(np.abs(x - y)) < tol:
            done = k
            break
    return x, y, done


def _program(device: str, shape: tuple, odf: int) -> list[str]:
    """Every operation (offsets, aliasing, strides, integer indices, NumPy-only
    functions, corners) and a statement group, three steps."""
    out = []
    d = len(shape)
    g, ref = start(shape, np.random.default_rng(sum(shape)), ghost_depth=2, odf=odf, device=device)
    with np.errstate(all="ignore"):
        for _ in range(3):
            program(g.u, g.v, g.w, d)
            g.u, g.v = g.v, g.u
            program(ref["u"], ref["v"], ref["w"], d)
            ref["u"], ref["v"] = ref["v"], ref["u"]
        grouped(g.u, g.v, g.w, d)
        grouped(ref["u"], ref["v"], ref["w"], d)
    got = finish(g)
    for name in ref:
        if not same(got[name], ref[name]):
            bad = int(np.sum(~((got[name] == ref[name]) | (np.isnan(got[name]) & np.isnan(ref[name])))))
            out.append(f"program {shape} odf={odf}: field {name} differs from NumPy at {bad} points")
    g.close()
    return out


def _loop(device: str, n: int, odf: int) -> list[str]:
    """A backend loop stopped by a convergence check (max norm, every 3 steps), then
    reductions of the result: max/min/max norm exact, sums to rounding."""
    out = []
    x0 = np.zeros((n, n))
    x0[0, :] = x0[:, 0] = 1.0
    x0[n // 3, n // 2] = 5.0
    g = Jacobi((n, n), odf=odf, device=device)
    g.x.from_numpy(x0)
    g.y.from_numpy(x0)
    steps = g.solve(steps=500, until=lambda: norm(g.x - g.y, np.inf) < 1e-4, check_every=3)
    x, y, want = _jacobi_numpy(x0.copy(), 500, 1e-4, 3)
    if steps != want:
        out.append(f"loop {n}x{n} odf={odf}: stopped after {steps} steps, NumPy after {want}")
    if not same(g.x.to_numpy(), x) or not same(g.y.to_numpy(), y):
        out.append(f"loop {n}x{n} odf={odf}: fields differ from NumPy after the loop")
    exact = {
        "max norm": (norm(g.x - g.y, np.inf), np.max(np.abs(x - y))),
        "maximum_of": (maximum_of(g.x[1:-1, 1:-1] * 3.0), np.max(x[1:-1, 1:-1] * 3.0)),
        "minimum_of": (minimum_of(g.x - 0.5 * g.y), np.min(x - 0.5 * y)),
    }
    for name, (red, ref) in exact.items():
        got = red.get()
        if got != float(ref):
            out.append(f"loop {n}x{n} odf={odf}: {name} is {got!r}, NumPy's {float(ref)!r}")
    rounded = {"total": (total(g.x), np.sum(x)), "2-norm": (norm(g.x - g.y), np.linalg.norm(x - y))}
    for name, (red, ref) in rounded.items():
        got = red.get()
        if not np.isclose(got, ref, rtol=1e-12, atol=0):
            out.append(f"loop {n}x{n} odf={odf}: {name} is {got!r}, NumPy's {float(ref)!r}")
    g.close()
    return out


def run_checks(device: str, odf: int, shapes: list | None = None, loop_n: int = 31) -> list[str]:
    """Run the programs on ``device`` with ``odf`` tiles per PE; the differences from NumPy."""
    out = []
    for shape in SHAPES if shapes is None else shapes:
        out += _program(device, tuple(shape), odf)
    if loop_n:
        out += _loop(device, loop_n, odf)
    return out


def checks_program(device: str, setup: str = "") -> str:
    """The text of a program that runs :func:`run_checks` for ``device`` on every PE of an
    ``mpiexec`` job (odf from its first argument) after ``setup`` (imports that register
    the device), prints each difference and ends with ``checks: OK``, or exit code 1."""
    tests = str(Path(__file__).resolve().parent.parent)
    return f"""
import sys
sys.path.insert(0, {tests!r})
{setup}
from support.stencil_device_checks import run_checks

problems = run_checks({device!r}, int(sys.argv[1]))
for p in problems:
    print("DIFFERS:", p)
print("checks:", "OK" if not problems else "FAIL")
sys.exit(1 if problems else 0)
"""
