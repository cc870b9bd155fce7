"""Figures of a results file: time per step against PEs, split into compute and communication.

One figure per app and configuration (pes apart): for each PE count a bar per target,
its lower part the median compute per step (the busiest PE's) and its upper part the
rest of the median step (communication and waiting, hatched), with the 99% CI of the
step's median as an error bar. Over-subscribed cells are left out and named under the
plot: their times are not performance. Built on matplotlib's Agg canvas, no pyplot.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from typing import Sequence

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from .analysis import Described

__all__ = ["Drawn", "step_figures"]


@dataclass(frozen=True, slots=True)
class Drawn:
    """One figure as PNG bytes, with its title and a file name."""

    title: str
    name: str
    png: bytes
    left_out: tuple[int, ...]  # over-subscribed pes not drawn


def _slug(text: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_=" else "_" for ch in text).strip("_")[:120]


def step_figures(described: Sequence[Described], metric: str, *, scale: float = 1e3,
                 unit: str = "ms") -> list[Drawn]:
    """The figures of ``described`` (one per app × configuration)."""
    groups: dict[tuple[str, str], list[Described]] = {}
    for d in described:
        groups.setdefault((d.cell.app, d.cell.configuration), []).append(d)
    out = []
    for (app, configuration), members in groups.items():
        shown = [d for d in members if not d.cell.oversubscribed]
        left_out = tuple(sorted({d.cell.pes for d in members if d.cell.oversubscribed}))
        if not shown:
            continue
        targets = list(dict.fromkeys(d.cell.target for d in shown))
        pes = sorted({d.cell.pes for d in shown})
        fig = Figure(figsize=(7.0, 4.2), dpi=110)
        FigureCanvasAgg(fig)
        ax = fig.add_subplot()
        width = 0.8 / len(targets)
        colors = [f"C{i}" for i in range(len(targets))]
        split = False
        for ti, target in enumerate(targets):
            for d in shown:
                if d.cell.target != target:
                    continue
                x = pes.index(d.cell.pes) + (ti - (len(targets) - 1) / 2) * width
                total = d.median * scale
                lower = total
                if d.cell.compute is not None and d.cell.comm is not None:
                    split = True
                    compute = sorted(d.cell.compute)[len(d.cell.compute) // 2] * scale
                    lower = min(compute, total)
                    ax.bar(x, total - lower, width, bottom=lower, color=colors[ti], alpha=0.45, hatch="//",
                           edgecolor=colors[ti])
                ax.bar(x, lower, width, color=colors[ti], edgecolor=colors[ti])
                if d.median_ci is not None:
                    ax.errorbar(x, total, yerr=[[max(total - d.median_ci.low * scale, 0.0)],
                                                [max(d.median_ci.high * scale - total, 0.0)]],
                                color="black", capsize=3, linewidth=1)
        ax.set_xticks(range(len(pes)), [str(p) for p in pes])
        ax.set_xlabel("PEs")
        ax.set_ylabel(f"{metric.replace('_', ' ')} ({unit}), median, 99% CI")
        ax.set_title(f"{app} {configuration}", fontsize=10)
        handles = [Patch(color=colors[i], label=t) for i, t in enumerate(targets)]
        if split:
            handles += [Patch(facecolor="white", edgecolor="grey", label="computation (solid)"),
                        Patch(facecolor="white", edgecolor="grey", hatch="//", label="communication and waiting")]
        ax.legend(handles=handles, fontsize=8)
        ax.grid(True, axis="y", alpha=0.3)
        if left_out:
            fig.text(0.01, 0.01, f"not drawn: pes {', '.join(map(str, left_out))} (over-subscribed, not performance)",
                     fontsize=8, color="firebrick")
        fig.tight_layout(rect=(0, 0.04 if left_out else 0, 1, 1))
        buf = io.BytesIO()
        fig.savefig(buf, format="png")
        out.append(Drawn(f"{app} {configuration}", f"{_slug(app + '-' + configuration)}.png", buf.getvalue(),
                         left_out))
    return out
