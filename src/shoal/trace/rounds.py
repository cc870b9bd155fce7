"""Balancing rounds in a trace: the loads between them, per PE and per element.

A round is recorded on every PE that took part; :func:`rounds` merges the records that
overlap into one interval per round. :func:`periods` splits the run at the rounds and
adds up, in each period, every PE's time in entry methods and every element's (a full
trace records the element of each run), so the report can show what each round changed:
the spread of the PEs' work before and after, and which elements carried the load where.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .analysis import Analysis

__all__ = ["rounds", "periods", "Period", "spread", "gaps", "moves"]


@dataclass
class Period:
    """The run between two rounds (or its start or end); times in µs."""

    start: float
    end: float
    #: [row] µs in entry methods
    work: np.ndarray
    #: element ("Tile[1, 0]") -> (µs in its entry methods, the row it ran on last)
    elements: dict[str, tuple[float, int]] = field(default_factory=dict)


def rounds(an: Analysis) -> list[tuple[float, float]]:
    """One (start, end) per balancing round, µs: overlapping records of the PEs merged."""
    spans = sorted((float(d["ts"]), float(d["ts"] + d["dur"])) for d in an.balances)
    merged: list[tuple[float, float]] = []
    for a, b in spans:
        if merged and a <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], b))
        else:
            merged.append((a, b))
    return merged


def periods(an: Analysis) -> list[Period]:
    """The periods between rounds (none without a round) with their loads (a summary-mode
    trace: the PEs' only, from the bins, which keep no run's element)."""
    found = rounds(an)
    if not found:
        return []
    lo, hi = float(an.spans[:, 0].min()), float(an.spans[:, 1].max())
    cuts = [(lo, found[0][0])] + [(found[i][1], found[i + 1][0]) for i in range(len(found) - 1)] + [(found[-1][1], hi)]
    out = []
    ends = an.slice_start + an.slice_dur
    for a, b in cuts:
        if an.summary_mode:  # no runs, only bins: each bin's share of the period
            left, right = an.edges[:-1], an.edges[1:]
            share = np.clip((np.minimum(right, b) - np.maximum(left, a)) / np.maximum(right - left, 1e-12), 0, 1)
            out.append(Period(start=a, end=b, work=an.busy @ share))
            continue
        sel = np.flatnonzero((an.slice_start >= a) & (ends <= b))
        work = np.zeros(len(an.rows))
        np.add.at(work, an.slice_row[sel], an.slice_dur[sel])
        elements: dict[str, tuple[float, int]] = {}
        for i in sel:
            el = an.slice_element[i]
            if not el:
                continue
            key = an.methods[an.slice_method[i]].rsplit(".", 1)[0] + el
            load = elements.get(key, (0.0, 0))[0]
            elements[key] = (load + float(an.slice_dur[i]), int(an.slice_row[i]))
        out.append(Period(start=a, end=b, work=work, elements=elements))
    return out


def spread(work: np.ndarray) -> float:
    """The busiest PE's work over the mean (1: even; 2: one PE does twice its share)."""
    mean = float(work.mean()) if len(work) else 0.0
    return float(work.max()) / mean if mean > 0 else 1.0


def gaps(an: Analysis) -> list[float]:
    """Per round, µs from the end of the last entry-method run before it to its start:
    the runtime's work between the step and the round (full traces; nan where unknown)."""
    ends = an.slice_start + an.slice_dur
    out = []
    for a, _ in rounds(an):
        before = ends[ends <= a]
        out.append(float(a - before.max()) if len(before) else float("nan"))
    return out


def moves(an: Analysis) -> list[int]:
    """Per round, the elements it moved (the largest count any PE recorded for it)."""
    out = []
    for a, b in rounds(an):
        counts = [int(d.get("moved", 0) or 0) for d in an.balances if a <= d["ts"] <= b]
        out.append(max(counts, default=0))
    return out
