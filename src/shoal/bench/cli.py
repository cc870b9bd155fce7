"""``shoal bench <name> …``: the registry of benchmark subcommands.

Each entry names a module with a ``main(argv) -> int``; it is imported only when
its subcommand runs, so a benchmark's optional dependencies cost nothing elsewhere.
"""

from __future__ import annotations

import importlib
import sys
from typing import Sequence

__all__ = ["BENCHMARKS", "main"]

#: subcommand -> (module with main(argv), one-line help)
BENCHMARKS: dict[str, tuple[str, str]] = {
    "micro": ("shoal.bench.micro.cli", "OSU-style point-to-point and collective micro-benchmarks"),
    "compare": ("shoal.bench.compare.cli", "run targets interleaved; medians, CIs, ratios and a figure"),
    "taskbench": ("shoal.bench.taskbench.cli", "Task Bench graphs and kernels on shoal, mpi4py and peers"),
    "metg": ("shoal.bench.taskbench.metg_cli", "Task Bench METG sweep: efficiency vs task granularity, METG(50%)"),
    "stencil": ("shoal.bench.stencil.cli", "stencil DSL vs NumPy and hand-written C (Jacobi, Burgers)"),
    "collectives": ("shoal.bench.compare.collectives", "the OSU collective set against mpi4py, 8 B to 4 MiB, as one figure"),
    "experiment": ("shoal.bench.experiment", "variants of a benchmark interleaved: medians, CIs, ratios, p-values"),
    "checkpoint": ("shoal.bench.ckpt.cli", "checkpoint write and restart read bandwidth against np.save/np.load"),
    "balance": ("shoal.bench.balance.cli", "load balancing: gain on a synthetic imbalance, migration MB/s"),
    "stencil-pipeline": ("shoal.bench.stencil.pipeline_cli", "stencil frontend overhead hidden? backend_freq vs one backend loop"),
    "link": ("shoal.bench.link", "client-server link: empty conn.run round trip, to_numpy/from_numpy GB/s"),
    "report": ("shoal.bench.evaluation.report", "tables, figures and an HTML report of an experiment's results CSV"),
    "stall": ("shoal.bench.stall.cli", "a large send to a busy PE: does the sender keep serving its messages?"),
    "scale": ("shoal.bench.scale.cli", "cost at scale: a million elements (time, bytes, ns per element), start-up"),
    "app": ("shoal.bench.apps.cli", "proxy applications: pic (particle-in-cell) on shoal, mpi4py, sequential"),
    "soak": ("shoal.bench.soak.cli", "migration and balancing under load, seeded: every runtime invariant checked"),
}


def main(argv: Sequence[str]) -> int:
    argv = list(argv)
    if not argv or argv[0] in ("-h", "--help") or argv[0] not in BENCHMARKS:
        out = sys.stdout if argv and argv[0] in ("-h", "--help") else sys.stderr
        if argv and argv[0] not in ("-h", "--help"):
            print(f"shoal bench: unknown benchmark {argv[0]!r}", file=out)
        print("usage: shoal bench {" + ",".join(BENCHMARKS) + "} [options]", file=out)
        for name, (_, text) in BENCHMARKS.items():
            print(f"  {name:<17} {text}", file=out)
        return 0 if argv and argv[0] in ("-h", "--help") else 2
    module = importlib.import_module(BENCHMARKS[argv[0]][0])
    return int(module.main(argv[1:]) or 0)
