"""What each balancing strategy decided and why: in the trace's rounds, in the report's
words and rounds table, and on the page as Chromium draws it."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
from support import EXAMPLES
from support.browser import chromium, rendered
from support.commands import clean_env

pytest.importorskip("plotly", reason="shoal trace report draws with Plotly (pip install plotly, or shoal[test])")

from shoal._runtime import strategies as S
from shoal._runtime.strategy_reasons import judge
from shoal._runtime.trace_file import write_trace
from shoal._runtime.tracing import Tracer
from shoal.trace.analysis import analyze
from shoal.trace.findings import findings
from shoal.trace.read import read_trace
from shoal.trace.reasons import reason_text
from shoal.trace.report import write_report

TWO = np.r_[np.zeros(16, np.int64), np.ones(16, np.int64)]


class Work:
    """Stands for a chare: a class whose functions are entry methods."""

    def __init__(self, index: tuple) -> None:
        self.index = index

    def step(self) -> None: ...


def _reasons() -> list[dict]:
    """Three rounds' reasons: auto under the threshold, auto's refine, greedy's from scratch."""
    even = np.r_[np.full(16, 1.03), np.full(16, 1.0)]
    _, under = S.auto_reasoned(even, S.CommGraph.empty(), TWO, 2, np.ones(2))
    rng = np.random.default_rng(5)
    loads, placement = rng.uniform(0.9, 1.1, 320), np.arange(320) % 32
    loads[placement == 0] *= 1.5
    _, few = S.auto_reasoned(loads, S.CommGraph.empty(), placement, 32, np.ones(32))
    fresh = judge("greedy", even, TWO, S.greedy(even, S.CommGraph.empty(), TWO, 2, np.ones(2)), np.ones(2), S.TOLERANCE)
    return [under.as_args(), few.as_args(), fresh.as_args()]


def _trace(tmp_path):
    recs = []
    for pe in (0, 1):
        t = Tracer(pe, lambda: 0.0)
        for k in range(4):
            t.run(Work((pe,)), Work.step, 0.25 * k, 0.25 * k + 0.2)
        if pe == 0:  # the coordinator records each round with its reason
            for k, (strategy, reason) in enumerate(zip(("auto", "auto", "greedy"), _reasons()), start=1):
                t.balance(0.25 * k - 0.04, 0.25 * k - 0.03, "Work", reason["moves"], strategy, reason)
            t.balance(0.99, 0.995, "Work", 1, "migrate()")  # a migrate() round: no reason
        recs.append(t.export())
    path = tmp_path / "t.json"
    write_trace(path, recs)
    return path


def test_each_rounds_reason_is_in_the_trace_and_in_words(tmp_path):
    path = _trace(tmp_path)
    rounds = [ev for ev in json.loads(path.read_text())["traceEvents"] if ev.get("cat") == "lb"]
    assert [ev["args"].get("reason", {}).get("why") for ev in rounds] == [
        "under threshold", "refine enough", "placed", None]
    an = analyze(read_trace(path).data)
    texts = [reason_text(d) for d in sorted(an.balances, key=lambda d: d["ts"])]
    assert texts[0] == "auto moved nothing — imbalance 1.5% under the 5% threshold"
    assert texts[1].startswith("auto chose refine: ") and "under the 5% threshold, saving about" in texts[1]
    assert texts[2].startswith("greedy moved ") and "though 1.5% is under the 5% threshold" in texts[2]
    assert texts[3] == ""
    said = [s for s in findings(an).sentences if s.startswith("What the strategy decided: ")]
    assert said and f"round 1: {texts[0]}; round 2: {texts[1]}; round 3: {texts[2]}." in said[0], said


def test_the_rounds_table_says_why(tmp_path):
    page = tmp_path / "r.html"
    write_report(_trace(tmp_path), page)
    text = page.read_text()
    assert "<th>why</th>" in text and "auto moved nothing — imbalance 1.5% under the 5% threshold" in text


def test_a_traced_auto_run_records_its_reasons(tmp_path):
    trace = tmp_path / "b.json"
    cmd = [sys.executable, "-m", "shoal", "run", "-n", "2", "--transport", "inproc", "--lb", "auto", "--trace",
           str(trace), str(EXAMPLES / "balance.py")]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=clean_env())
    assert proc.returncode == 0, proc.stderr
    rounds = [ev["args"] for ev in json.loads(trace.read_text())["traceEvents"] if ev.get("cat") == "lb"]
    assert rounds and all(r["strategy"] == "auto" and r["reason"]["moves"] == r["moved"] for r in rounds), rounds
    first = rounds[0]["reason"]  # the expensive half starts on PE 0: far over the threshold
    assert first["imbalance"] > first["threshold"] and first["plan"] in ("refine", "greedy") and first["after"] < 1.3


def test_reasons_render_in_headless_chromium(tmp_path):
    chromium()
    page = tmp_path / "r.html"
    write_report(_trace(tmp_path), page)
    dom = rendered(page)
    words = dom[dom.index('id="words"'):]
    assert "round 1: auto moved nothing — imbalance 1.5% under the 5% threshold" in words
    start = dom.index('id="plot-timeline"')
    assert 'class="main-svg"' in dom[start:start + 3000]
