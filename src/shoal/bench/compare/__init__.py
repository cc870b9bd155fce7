"""``shoal bench compare <test>``: several targets, interleaved trials, statistics, a figure.

Each *trial* is one ``shoal bench micro <test> --target … --json`` process (its own MPI
job), so trials are independent launches, as the benchmark methodology asks
(docs/benchmarks.md). For ``--trials N`` the comparison runs N *rounds*; every round runs each target
once, in a **fresh random order per round** (a new shuffle each round, seeded by
``--seed``), so drift of the machine over time spreads evenly over the targets instead
of favouring whichever runs first, and each target gets exactly N trials.

Per message size it reports each target's median over trials, a bootstrap 95% CI of
the median, the ratio of medians to the ``--baseline`` target with its bootstrap CI,
and Mann–Whitney U p-values against the baseline (two-sided, and one-sided for "faster
than the baseline"). Everything, with every sample, goes to ``<out>/compare.json``; the
curves go to ``<out>/compare.png``.

The modules, one stage each: :mod:`.plan` decides what runs (:func:`parse_targets`,
:func:`schedule`); :mod:`.trial` runs one trial (a :data:`TrialRunner`,
:class:`MicroRunner` by default; tests inject a fake); :mod:`.analysis` turns results
into statistics (:func:`collect`, :func:`summarize_all`); :mod:`.report` prints the
tables and builds the figure and the results document; :mod:`.cli` is the command and
its loop. scipy, rich and matplotlib (the ``bench`` extra) are imported inside the
functions that use them, so without them ``main`` prints a one-line install hint
instead of a traceback.
"""

from __future__ import annotations

from .analysis import Collected, Trial, collect, summarize_all
from .cli import main
from .plan import ORDER, VALID_TARGETS, CompareError, Target, parse_targets, schedule
from .report import SCHEMA, make_figure, print_tables, results_document
from .trial import UNITS, MicroRunner, Row, TrialFailed, TrialRequest, TrialResult, TrialRunner

__all__ = [
    "VALID_TARGETS",
    "UNITS",
    "ORDER",
    "SCHEMA",
    "CompareError",
    "Target",
    "TrialRequest",
    "Row",
    "TrialResult",
    "TrialFailed",
    "TrialRunner",
    "MicroRunner",
    "Trial",
    "Collected",
    "parse_targets",
    "schedule",
    "collect",
    "summarize_all",
    "print_tables",
    "make_figure",
    "results_document",
    "main",
]
