"""What each balancing strategy decided and why, in words, from the rounds of a trace.

The coordinator of a round records the strategy's reason (``args.reason`` of the round's
slice: :class:`shoal._runtime.strategy_reasons.Reason` as JSON). :func:`reason_text`
makes one round's reason a clause ("auto moved nothing — imbalance 3% under the 5%
threshold"); :func:`decisions` gives the report's sentence about every round.
"""

from __future__ import annotations

from typing import Any, Mapping

from .._runtime.strategy_reasons import BETTER, ENOUGH, NEEDED, NO_GAIN, UNDER, UNPAID
from .analysis import Analysis

__all__ = ["reason_text", "decisions", "MAX_ROUNDS"]

#: the rounds the report's words name one by one (the first ones and the last)
MAX_ROUNDS = 6


def _pct(ratio: Any) -> str:
    """A max/avg ratio as the imbalance it means: 1.03 -> ``3%``."""
    x = round(100 * (float(ratio) - 1), 1)
    return f"{x:.0f}%" if x == round(x) or abs(x) >= 10 else f"{x:.1f}%"


def _ms(seconds: Any) -> str:
    return f"{1e3 * float(seconds):.3g} ms"


def reason_text(d: Mapping[str, Any]) -> str:
    """One round's reason as a clause (``""`` where the round recorded none)."""
    r = d.get("reason")
    if not isinstance(r, Mapping) or not all(isinstance(r.get(k), (int, float)) for k in ("imbalance", "threshold",
                                                                                         "moves", "after")):
        return ""
    name, why, moves = str(d.get("strategy")), r.get("why"), int(r["moves"])
    imb, thr, after = _pct(r["imbalance"]), _pct(r["threshold"]), _pct(r["after"])
    weighed = f"{r.get('weighed') or r.get('plan')}'s {'move' if moves == 1 else 'moves'}"
    pays = (f", saving about {_ms(r['saved'])} a period for {_ms(r['cost'])} of moving"
            if isinstance(r.get("saved"), (int, float)) and isinstance(r.get("cost"), (int, float)) else "")
    if why == UNDER:
        return f"{name} moved nothing — imbalance {imb} under the {thr} threshold"
    if why == ENOUGH:
        return (f"{name} chose refine: {moves} {'move takes' if moves == 1 else 'moves take'} the imbalance from "
                f"{imb} to {after}, under the {thr} threshold{pays}")
    if why == BETTER:
        return f"{name} chose refine: {moves} moves take the imbalance from {imb} to {after}{pays} (more than greedy's)"
    if why == NEEDED:
        return (f"{name} chose greedy: refine's moves left the imbalance over the {thr} threshold; greedy's {moves} "
                f"moves take it from {imb} to {after}{pays}")
    if why == UNPAID:
        cost = (f": {weighed} would save about {_ms(r['saved'])} a period but cost about {_ms(r['cost'])} to make"
                if pays else "")
        return f"{name} moved nothing — imbalance {imb} is over the {thr} threshold, but a big move would not pay{cost}"
    if why == NO_GAIN:
        return f"{name} moved nothing — imbalance {imb}, but no plan saved more than its moves cost"
    if not moves:
        return f"{name} moved nothing (imbalance {imb})"
    even = (f" — though {imb} is under the {thr} threshold that auto and refine leave alone"
            if float(r["imbalance"]) <= float(r["threshold"]) else "")
    return f"{name} moved {moves}: imbalance {imb} before, {after} predicted after{even}"


def decisions(an: Analysis) -> str:
    """A sentence naming what the strategy decided in each round that recorded a reason
    (the first ones and the last, past :data:`MAX_ROUNDS`); ``""`` if none did."""
    said = [(k, text) for k, d in enumerate(sorted(an.balances, key=lambda d: d["ts"]), start=1)
            if (text := reason_text(d))]
    if not said:
        return ""
    shown = said if len(said) <= MAX_ROUNDS else [*said[:MAX_ROUNDS - 1], said[-1]]
    parts = [f"round {k}: {text}" for k, text in shown]
    if len(shown) < len(said):
        parts.insert(MAX_ROUNDS - 1, f"… {len(said) - len(shown)} more …")
    return "What the strategy decided: " + "; ".join(parts) + "."
