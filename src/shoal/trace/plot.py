"""A picture of a timeline: one row per PE, entry methods, idle time, migrations and
balancing rounds over time (``shoal trace plot out.json -o timeline.png``).

Perfetto shows a trace interactively; this draws a still image for documents and
reports from the same file (:func:`shoal.trace.summary.load_trace` reads it).
"""

from __future__ import annotations

import os
from typing import Any, Mapping

__all__ = ["plot_trace", "COLORS"]

#: category -> colour of its slices
COLORS = {"entry": "#2e9d5a", "idle": "#c8c8c8", "migration": "#d62728", "lb": "#1f5fbf"}


def plot_trace(trace: Mapping[str, Any], path: str | os.PathLike[str], *, start: float | None = None,
               end: float | None = None, title: str | None = None) -> int:
    """Draw ``trace`` (a loaded trace file) to ``path`` (PNG, SVG, PDF: by its suffix),
    between ``start`` and ``end`` seconds from its beginning; the number of slices drawn."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    events = trace["traceEvents"]
    names = {ev["tid"]: ev["args"]["name"] for ev in events if ev.get("ph") == "M" and ev.get("name") == "thread_name"}
    slices = [ev for ev in events if ev.get("ph") == "X" and ev.get("cat") in COLORS]
    lo = (start or 0.0) * 1e6
    hi = end * 1e6 if end is not None else max((ev["ts"] + ev["dur"] for ev in slices), default=1.0)
    tids = sorted({ev["tid"] for ev in slices} | set(names))
    rows = {tid: i for i, tid in enumerate(tids)}
    fig, ax = plt.subplots(figsize=(11, 1.3 + 0.45 * len(tids)))
    drawn = 0
    for cat in ("idle", "entry", "lb", "migration"):  # migrations and rounds on top
        bars: dict[int, list] = {}
        for ev in slices:
            if ev["cat"] != cat or ev["ts"] + ev["dur"] < lo or ev["ts"] > hi:
                continue
            a, b = max(ev["ts"], lo), min(ev["ts"] + ev["dur"], hi)
            bars.setdefault(rows[ev["tid"]], []).append(((a - lo) / 1e3, max(b - a, (hi - lo) * 2e-4) / 1e3))
        height = 0.8 if cat in ("entry", "idle") else 0.35
        for row, spans in bars.items():
            ax.broken_barh(spans, (row - height / 2, height), facecolors=COLORS[cat], linewidth=0)
            drawn += len(spans)
    ax.set_yticks(range(len(tids)), [names.get(t, f"tid {t}") for t in tids])
    ax.invert_yaxis()
    ax.set_xlim(0, (hi - lo) / 1e3)
    ax.set_xlabel(f"time (ms{f' from {start:g} s' if start else ''})")
    handles = [Patch(color=c, label=k if k != "lb" else "balancing round") for k, c in COLORS.items()]
    handles.append(Patch(facecolor="white", edgecolor="#999999", label="white: the runtime's own work"))
    ax.legend(handles=handles, loc="lower right", bbox_to_anchor=(1.0, 1.0), ncol=5, frameon=False,
              fontsize="small")
    if title:
        ax.set_title(title, loc="left", fontsize="medium")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return drawn
