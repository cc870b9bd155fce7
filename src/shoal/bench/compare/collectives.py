"""``shoal bench collectives``: the OSU collective set, shoal against mpi4py, as one figure.

Runs ``shoal bench compare TEST`` for each collective (interleaved trials, medians,
bootstrap CIs and ratios to the baseline, one results folder each under ``--out``),
then draws every test's ratio to the baseline against message size in one grid of
panels (``collectives.png``) and prints the ratios at a few sizes as one table.
``--report-only`` redraws from the folders a previous run left.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Sequence

__all__ = ["main", "DEFAULT_TESTS"]

#: the OSU collectives issue 19 names, then the v-variants shoal has
DEFAULT_TESTS = ("allreduce", "reduce", "bcast", "gather", "allgather", "alltoall", "barrier",
                 "scatter", "reduce_scatter", "gatherv", "allgatherv", "alltoallv", "scatterv")
#: the sizes of the printed table
TABLE_SIZES = (8, 1024, 65536, 1 << 20, 4 << 20)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="shoal bench collectives", description=__doc__.splitlines()[0])
    p.add_argument("--tests", default=",".join(DEFAULT_TESTS), help="comma-separated collectives (default: all of OSU's)")
    p.add_argument("--targets", default="shoal,mpi4py", help="targets, as for compare (default shoal,mpi4py)")
    p.add_argument("--baseline", default="mpi4py", help="the ratios' denominator (mpi4py)")
    p.add_argument("--trials", type=int, default=3, help="rounds per test (3)")
    p.add_argument("-m", dest="sizes", default="8:4194304", help="message sizes MIN:MAX (8:4194304)")
    p.add_argument("-n", "--pes", type=int, default=2, help="PEs (2)")
    p.add_argument("--seed", type=int, default=19, help="seed of the run orders (19)")
    p.add_argument("--out", default="results/collectives", help="results folder (results/collectives)")
    p.add_argument("--report-only", action="store_true", help="draw and print from an earlier run's folders")
    return p


def _ratios(doc: dict, baseline: str) -> dict[str, list[tuple[int, float, float, float]]]:
    """target -> [(size, ratio, CI low, CI high)] of one compare.json."""
    out: dict[str, list] = {}
    for s in doc["summary"]:
        if s["target"] != baseline and s.get("ratio") is not None:
            low, high = s["ratio_ci"]
            out.setdefault(s["target"], []).append((s["size"], s["ratio"], low, high))
    return out


def figure(docs: dict[str, dict], baseline: str) -> Any:
    """One panel per test: each target's median / the baseline's against size, with CIs."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.ticker import LogLocator, NullFormatter, ScalarFormatter

    cols = 4
    rows = -(-len(docs) // cols)
    fig = Figure(figsize=(3.4 * cols, 2.6 * rows), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(rows, cols, squeeze=False)
    for ax, (test, doc) in zip(axes.flat, docs.items()):
        for i, (target, pts) in enumerate(_ratios(doc, baseline).items()):
            sizes = [p[0] for p in pts]
            ratio = [p[1] for p in pts]
            err = [[p[1] - p[2] for p in pts], [p[3] - p[1] for p in pts]]
            ax.errorbar(sizes, ratio, yerr=err, marker="o", markersize=3, capsize=2, color=f"C{i}", label=target)
        if any(s["size"] > 0 for s in doc["summary"]):
            ax.set_xscale("log", base=2)
        else:  # the barrier: no payload, one point
            ax.set_xticks([])
            ax.set_xlabel("no payload", fontsize="small")
        ax.set_yscale("log")
        ax.yaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
        ax.yaxis.set_major_formatter(ScalarFormatter())
        ax.yaxis.set_minor_formatter(NullFormatter())
        ax.axhline(1.0, color="black", linewidth=0.8, linestyle="--")
        ax.set_title(test, fontsize="medium")
        ax.tick_params(labelsize="small")
    for ax in list(axes.flat)[len(docs):]:
        ax.set_visible(False)
    axes[0][0].legend(fontsize="small")
    fig.supxlabel("message size (bytes)")
    fig.supylabel(f"time / {baseline}'s (lower is better)")
    return fig


def table(docs: dict[str, dict], baseline: str) -> list[str]:
    """Markdown rows: each test's ratio (and CI) at TABLE_SIZES."""
    head = "| test | " + " | ".join(_size(s) for s in TABLE_SIZES) + " |"
    lines = [head, "|---" * (len(TABLE_SIZES) + 1) + "|"]
    for test, doc in docs.items():
        for target, pts in _ratios(doc, baseline).items():
            by_size = {p[0]: p for p in pts}
            cells = []
            for size in TABLE_SIZES:
                p = by_size.get(size) or (by_size.get(0) if size == TABLE_SIZES[0] else None)  # barrier: size 0
                cells.append(f"{p[1]:.2f} [{p[2]:.2f}, {p[3]:.2f}]" if p else "")
            lines.append(f"| {test} ({target}) | " + " | ".join(cells) + " |")
    return lines


def _size(n: int) -> str:
    return f"{n >> 20} MiB" if n >= 1 << 20 else f"{n >> 10} KiB" if n >= 1024 else f"{n} B"


def main(argv: Sequence[str]) -> int:
    from . import cli as compare

    ns = _parser().parse_args(argv)
    tests = [t for t in ns.tests.split(",") if t]
    out = Path(ns.out)
    docs: dict[str, dict] = {}
    for test in tests:
        folder = out / test
        if not ns.report_only:
            code = compare.main([test, "--targets", ns.targets, "--baseline", ns.baseline, "--trials", str(ns.trials),
                                 "-m", ns.sizes, "-n", str(ns.pes), "--seed", str(ns.seed), "--out", str(folder)])
            if code:
                print(f"shoal bench collectives: {test} failed (exit code {code})", file=sys.stderr)
                return code
        path = folder / "compare.json"
        if not path.exists():
            print(f"shoal bench collectives: no results for {test} in {folder}", file=sys.stderr)
            return 2
        docs[test] = json.loads(path.read_text())
    from .. import plot

    print(f"wrote {plot.save(figure(docs, ns.baseline), out / 'collectives.png')}")
    print("\n".join(table(docs, ns.baseline)))
    return 0
