"""Figures for benchmark results: curves of a measure against message size.

Figure functions only: they take plain numbers and return a matplotlib ``Figure``;
:func:`save` writes one to disk. Figures are built with ``matplotlib.figure.Figure`` and
the Agg canvas directly, never through ``pyplot``, so no global backend is switched and
no display is needed (batch jobs and CI have none).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter

__all__ = ["Curve", "UNIT_LABELS", "curves_figure", "save"]

#: y-axis label per unit of the micro-benchmark JSON
UNIT_LABELS: dict[str, str] = {"us": "latency (µs)", "MB/s": "bandwidth (MB/s)"}


@dataclass(frozen=True, slots=True)
class Curve:
    """One line: a median and its confidence interval at each x (message size)."""

    label: str
    x: Sequence[float]
    median: Sequence[float]
    low: Sequence[float]
    high: Sequence[float]

    def positive(self) -> "Curve":
        """The points a log-log axis can show (x > 0 and median > 0)."""
        keep = [i for i, (x, m) in enumerate(zip(self.x, self.median)) if x > 0 and m > 0]
        pick = lambda seq: [seq[i] for i in keep]  # noqa: E731
        return Curve(self.label, pick(self.x), pick(self.median), pick(self.low), pick(self.high))


def _draw(ax: Axes, curves: Sequence[Curve], colors: dict[str, str]) -> None:
    """Median lines with asymmetric CI error bars on log-log axes."""
    for curve in curves:
        c = curve.positive()
        if not c.x:
            continue
        yerr = [
            [max(m - lo, 0.0) for m, lo in zip(c.median, c.low)],
            [max(hi - m, 0.0) for m, hi in zip(c.median, c.high)],
        ]
        ax.errorbar(c.x, c.median, yerr=yerr, label=c.label, color=colors.get(c.label), marker="o", markersize=3, capsize=3, linewidth=1.2)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.xaxis.set_major_formatter(FuncFormatter(_size_label))
    # plain numbers (0.5, 2, 300) rather than 2x10^0; minor ticks labelled on short ranges
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}"))
    ax.yaxis.set_minor_formatter(FuncFormatter(lambda v, _pos: _minor_label(ax, v)))
    ax.grid(True, which="major", alpha=0.3)


def _minor_label(ax: Axes, value: float) -> str:
    """Label minor log ticks only as densely as the y range leaves room for."""
    low, high = ax.get_ylim()
    decades = math.log10(high / low) if low > 0 and high > low else math.inf
    lead = round(value / 10 ** math.floor(math.log10(value))) if value > 0 else 0
    if decades <= 1 or (decades <= 2 and lead in (2, 5)):
        return f"{value:g}"
    return ""


def _size_label(value: float, _pos: object = None) -> str:
    """Byte counts as 1, 64, 1K, 4M (powers of two read best on a base-2 axis)."""
    n = int(round(value))
    for suffix, scale in (("M", 1 << 20), ("K", 1 << 10)):
        if n >= scale and n % scale == 0:
            return f"{n // scale}{suffix}"
    return f"{value:g}"


def curves_figure(
    curves: Sequence[Curve],
    *,
    unit: str,
    title: str = "",
    ratios: Sequence[Curve] = (),
    baseline: str | None = None,
) -> Figure:
    """Measure vs message size (log-log), one line per target, medians with CI bars.

    With ``ratios`` (each target's median / the baseline's, with the ratio's CI) a second
    panel below shows them against a reference line at 1, which is where the performance
    targets of a comparison are read off.
    """
    panels = 2 if ratios else 1
    fig = Figure(figsize=(7.0, 4.5 if panels == 1 else 7.5), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(panels, 1, sharex=True, squeeze=False)[:, 0]
    # one colour per label in both panels, although the baseline has no ratio line
    colors = {label: f"C{i % 10}" for i, label in enumerate(dict.fromkeys(c.label for c in (*curves, *ratios)))}
    top = axes[0]
    _draw(top, curves, colors)
    top.set_ylabel(UNIT_LABELS.get(unit, unit))
    if title:
        top.set_title(title)
    top.legend(fontsize="small")
    if ratios:
        bottom = axes[1]
        _draw(bottom, ratios, colors)
        bottom.axhline(1.0, color="black", linewidth=0.8, linestyle="--")
        bottom.set_ylabel(f"ratio to {baseline}" if baseline else "ratio to baseline")
        bottom.legend(fontsize="small")
    axes[-1].set_xlabel("message size (bytes)")
    return fig


def save(fig: Figure, path: str | Path, *, dpi: int = 120) -> Path:
    """Write ``fig`` to ``path`` (format from the suffix) and return the path."""
    path = Path(path)
    fig.savefig(path, dpi=dpi)
    return path
