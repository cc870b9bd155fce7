"""``shoal bench app pic``: its options, its targets, how each cuts the mesh, its report.

What the generic command (:mod:`shoal.bench.apps.cli`) asks of an app: ``TARGETS``
(target -> module with ``run(cfg) -> int``, and whether it runs under mpiexec),
``DEFAULT_STEPS``, ``add_options(parser)`` and ``configure(namespace) -> Config``.
"""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass, replace
from typing import Any, Sequence

from ..report import AppReport
from .layout import Layout, prk_grid, squarest_split
from .physics import DISTRIBUTIONS, Problem, Verification, expected_id_sum

__all__ = ["TARGETS", "DEFAULT_STEPS", "HELP", "Config", "add_options", "configure", "layout", "make_report"]

HELP = "particle-in-cell (the Parallel Research Kernels' PIC)"

#: target -> (module with run(cfg) -> int, "mpi": runs under mpiexec / "local": in this process)
TARGETS: dict[str, tuple[str, str]] = {
    "shoal": ("shoal.bench.apps.pic.shoal_target", "mpi"),
    "mpi4py": ("shoal.bench.apps.pic.mpi4py_target", "mpi"),
    "sequential": ("shoal.bench.apps.pic.sequential", "local"),
}
DEFAULT_STEPS = 100


@dataclass(frozen=True)
class Config:
    """One run of the PIC app: the problem and how the chosen target runs it."""

    problem: Problem
    target: str = "shoal"
    pes: int = 2
    json: bool = False
    mpiexec: str | None = None
    transport: str = "mpi"  # shoal: "inproc" runs every PE in this process
    odf: int = 8  # shoal: tiles per PE
    lb_period: int = 0  # shoal: at_sync every this many steps (0: never; -1: every step, the runtime picks the rounds)
    lb: str = "greedy"  # shoal: the balancing strategy, where the runtime can choose one

    def with_pes(self, pes: int) -> "Config":
        return replace(self, pes=pes)


def add_options(p: argparse.ArgumentParser) -> None:
    d = Problem()
    g = p.add_argument_group("pic")
    g.add_argument("--size", type=int, default=d.size, metavar="L", help=f"cells per side of the mesh (even; {d.size})")
    g.add_argument("--particles", type=int, default=d.particles, metavar="N",
                   help=f"particles requested (the distribution places about this many; {d.particles})")
    g.add_argument("--dist", choices=DISTRIBUTIONS, default=d.dist, help=f"initial distribution ({d.dist})")
    g.add_argument("--r", type=float, default=d.r, help=f"geometric: density ratio of successive columns ({d.r})")
    g.add_argument("--alpha", type=float, default=d.alpha, help=f"linear: negative slope ({d.alpha})")
    g.add_argument("--beta", type=float, default=d.beta, help=f"linear: offset ({d.beta})")
    g.add_argument("--patch", default=None, metavar="X0,X1,Y0,Y1",
                   help="patch: inclusive cell bounds (default: the lower-left quadrant)")
    g.add_argument("--k", type=int, default=d.k, help=f"particles move 2k+1 cells in x per step ({d.k})")
    g.add_argument("--m", type=int, default=d.m, help=f"particles move m cells in y per step ({d.m})")
    g.add_argument("--odf", type=int, default=Config.odf, help=f"shoal: tiles per PE ({Config.odf})")
    g.add_argument("--lb-period", type=_period, default=0, metavar="K|auto",
                   help="shoal: every K steps the tiles call at_sync() so the runtime can balance (0: never; "
                        "auto: every step, and the runtime balances as often as the drift makes it pay)")
    g.add_argument("--lb", default=Config.lb, metavar="STRATEGY",
                   help=f"shoal: balancing strategy, with --lb-period ({Config.lb})")
    g.add_argument("--checkpoint-every", type=float, default=0.0, metavar="SECONDS",
                   help="shoal: checkpoint to ./pic.ckpt this often, between chunks of 100 steps (0: never)")


def _period(text: str) -> int:
    """``--lb-period``: a number of steps, or ``auto`` (-1)."""
    return -1 if text.strip().lower() == "auto" else int(text)


def _patch(text: str | None) -> tuple[int, int, int, int] | None:
    if text is None:
        return None
    try:
        x0, x1, y0, y1 = (int(v) for v in text.split(","))
    except ValueError:
        raise ValueError(f"--patch {text!r}: give four integers X0,X1,Y0,Y1 (inclusive cell bounds)") from None
    return (x0, x1, y0, y1)


def configure(ns: argparse.Namespace) -> Config:
    """The validated configuration; ValueError naming a bad option otherwise."""
    problem = Problem(size=ns.size, particles=ns.particles, steps=ns.steps, dist=ns.dist, r=ns.r, alpha=ns.alpha,
                      beta=ns.beta, patch=_patch(ns.patch), k=ns.k, m=ns.m)
    problem.check()
    if ns.pes < 1:
        raise ValueError(f"-n {ns.pes}: need at least 1 PE")
    if ns.odf < 1:
        raise ValueError(f"--odf {ns.odf}: need at least 1 tile per PE")
    if ns.checkpoint_every < 0:
        raise ValueError(f"--checkpoint-every {ns.checkpoint_every}: give 0 (none) or a number of seconds")
    if ns.checkpoint_every:  # the runtime's setting, for every PE of the job this command starts
        os.environ["SHOAL_CHECKPOINT_EVERY"] = repr(ns.checkpoint_every)
        os.environ["SHOAL_CHECKPOINT_DIR"] = os.path.abspath("pic.ckpt")
    if ns.lb_period < -1:
        raise ValueError(f"--lb-period {ns.lb_period}: give 0 (no balancing), a positive number of steps or auto")
    cfg = Config(problem, ns.target, ns.pes, ns.json, ns.mpiexec, ns.transport, ns.odf, ns.lb_period, ns.lb)
    grid, what = layout(cfg)
    grid.check(problem.k, problem.m, what)
    return cfg


def layout(cfg: Config) -> tuple[Layout, str]:
    """How the target cuts the mesh, and a phrase naming it for messages.

    sequential: one block. mpi4py: the PRK's rank grid (:func:`prk_grid`). shoal: the
    same grid of PEs, each PE's block cut again into ``odf`` tiles as square as
    possible, so tile ``(tx, ty)`` starts on the PE whose block holds it."""
    L = cfg.problem.size
    if cfg.target == "sequential":
        return Layout.grid(L, 1, 1), "the sequential run"
    px, py = prk_grid(cfg.pes)
    if cfg.target == "mpi4py":
        return Layout.grid(L, px, py), f"the {px} x {py} grid of ranks"
    ax, ay = squarest_split(cfg.odf, px, py)
    return Layout.grid(L, px * ax, py * ay), f"the {px * ax} x {py * ay} grid of tiles (--odf {cfg.odf})"


def make_report(cfg: Config, pes: int, elapsed: float, compute: Sequence[float], result: Verification,
                placed: int, decomposition: str, extra: dict[str, Any] | None = None,
                lines: list[tuple[str, str]] | None = None) -> AppReport:
    """The report of a run: ``elapsed`` seconds over the timed steps, ``compute`` the
    seconds each PE spent in the kernels, ``result`` the summed verification of every
    owner, ``placed`` the particles the distribution placed."""
    from .kernels import NUMBA

    p = cfg.problem
    steps = p.steps
    per_step = elapsed / steps
    busiest = max(compute) / steps if compute else None
    comm = None if busiest is None else max(0.0, per_step - busiest)
    mean = sum(compute) / len(compute) if compute else 0.0
    imbalance = max(compute) / mean if compute and mean > 0 else 1.0
    ok_ids = result.id_sum == expected_id_sum(placed)
    verified = result.particles == placed and result.correct == placed and ok_ids
    if verified:
        verdict = (f"({placed:,} particles at their analytic positions after {p.moves} moves; "
                   f"checksum {result.checksum:#018x})")
    elif result.particles != placed:
        verdict = f"({result.particles:,} particles at the end, but {placed:,} were placed)"
    elif result.correct != placed:
        verdict = f"({placed - result.correct:,} of {placed:,} particles are not at their analytic positions)"
    else:
        verdict = "(the particle IDs do not add up to N(N+1)/2: particles were lost or duplicated)"
    dist = {"geometric": f"geometric r={p.r}", "linear": f"linear alpha={p.alpha} beta={p.beta}",
            "patch": "patch {},{},{},{}".format(*p.patch_box), "sinusoidal": "sinusoidal"}[p.dist]
    headline = (f"{p.size}x{p.size} mesh, {placed:,} particles ({p.particles:,} requested), {steps} steps, "
                f"{dist}, k={p.k} m={p.m}")
    rate = placed * steps / elapsed / 1e6 if elapsed > 0 else float("inf")
    all_lines = [("decomposition", decomposition), ("rate", f"{rate:.2f} Mparticles moved/s"),
                 ("compute balance", f"busiest PE / mean = {imbalance:.3f}"),
                 ("kernels", "Numba" if NUMBA else "NumPy (Numba is not installed)"), *(lines or [])]
    fields: dict[str, Any] = {
        "size": p.size, "particles": placed, "particles_requested": p.particles, "dist": p.dist,
        "r": p.r, "alpha": p.alpha, "beta": p.beta, "patch": list(p.patch_box), "k": p.k, "m": p.m,
        "odf": cfg.odf if cfg.target == "shoal" else None, "lb_period": cfg.lb_period if cfg.target == "shoal" else 0,
        "id_sum": result.id_sum, "rate_mparticles_per_s": rate, "compute_imbalance": imbalance,
        "compute_per_pe": [c / steps for c in compute], "kernels": "numba" if NUMBA else "numpy",
        "elapsed": elapsed,
    }
    fields.update(extra or {})
    return AppReport("pic", cfg.target, pes, steps, per_step, busiest, comm, verified, result.checksum,
                     headline, all_lines, verdict, fields)
