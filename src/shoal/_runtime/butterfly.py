"""The butterfly all-reduce on the Python path: partial values exchanged pairwise.

An all-reduce of a whole collection with elements on every PE, with a built-in
unordered reducer, needs no tree: in round k each PE swaps its value with the PE whose
number differs in bit k and combines the two, so after log2(PEs) rounds every PE holds
the result (recursive doubling, as MPI libraries do for small all-reduces). Both
partners combine the lower PE's value first, so every PE ends with the same bits. PEs
beyond the largest power of two fold their value into a partner first and get the
result back from it at the end. The compiled core runs the same steps
(``_native/exchange.c``); this is the reference path.
"""

from __future__ import annotations

import functools

TYPE_CHECKING = False  # typing is for type checkers: a PE's start-up skips its import
if TYPE_CHECKING:
    from typing import Any, Callable

    from .reducers import Reducer
    from .runtime import Runtime

from .message import Kind

__all__ = ["Butterflies", "steps_of", "SEND", "SENDRECV", "RECV", "LAST"]

SEND, SENDRECV, RECV = 1, 2, 0  # what a step does (exchange.c's STEP_SEND ...)
LAST = 0xFFFF  # the round that hands the result to a PE outside the power of two
_EXCHANGE_KIND = int(Kind.EXCHANGE)  # a plain int: an enum member costs a lookup per use
_MISSING = object()


@functools.lru_cache(maxsize=64)
def steps_of(pe: int, npes: int) -> tuple[tuple[int, int, int], ...]:
    """PE ``pe``'s steps of a recursive-doubling all-reduce: (what, partner PE, round)."""
    p2 = 1 << (npes.bit_length() - 1)
    if pe >= p2:
        return ((SEND, pe - p2, 0), (RECV, pe - p2, LAST))
    steps = [(RECV, pe + p2, 0)] if pe < npes - p2 else []
    bit, round = 1, 1
    while bit < p2:
        steps.append((SENDRECV, pe ^ bit, round))
        bit, round = bit << 1, round + 1
    if pe < npes - p2:
        steps.append((SEND, pe + p2, LAST))
    return tuple(steps)


class _Exchange:
    """One PE's progress in one butterfly all-reduce."""

    __slots__ = ("value", "reducer", "steps", "stage", "sent", "early")

    def __init__(self) -> None:
        self.value: Any = None
        self.reducer: Reducer | None = None
        self.steps: tuple | None = None  # None until this PE's own elements have contributed
        self.stage = 0
        self.sent = False  # the send of the current step is done
        self.early: dict[int, Any] = {}  # round -> the partner's value, until this PE gets there


class Butterflies:
    """This PE's butterfly all-reduces under way, by ``(domain, seq)``; ``done(key, value)``
    gets each result."""

    def __init__(self, rt: "Runtime", done: "Callable[[tuple, Any], None]"):
        self.rt, self.done = rt, done
        self.under_way: dict[tuple, _Exchange] = {}
        self.steps: tuple | None = None  # this PE's (made on first use)

    def start(self, key: tuple, value: Any, reducer: "Reducer") -> None:
        """Start all-reduce ``key`` with this PE's partial ``value``."""
        ex = self.under_way.get(key)
        if ex is None:
            ex = self.under_way[key] = _Exchange()
        ex.value, ex.reducer = value, reducer
        steps = self.steps
        if steps is None:
            steps = self.steps = steps_of(self.rt.pe, self.rt.npes)
        ex.steps = steps
        self._advance(key, ex)

    def arrive(self, key: tuple, round: int, value: Any) -> None:
        """A partner's value for one round of all-reduce ``key``."""
        ex = self.under_way.get(key)
        if ex is None:
            ex = self.under_way[key] = _Exchange()
        ex.early[round] = value
        if ex.steps is not None:
            self._advance(key, ex)

    def _advance(self, key: tuple, ex: _Exchange) -> None:
        steps, rt, reducer = ex.steps, self.rt, ex.reducer
        assert steps is not None and reducer is not None
        while ex.stage < len(steps):
            send, peer, round = steps[ex.stage]
            if send and not ex.sent:
                rt.post_value(peer, _EXCHANGE_KIND, round, key[1], key[0][0], ex.value)
                ex.sent = True
                if send == SEND:
                    ex.stage += 1
                    ex.sent = False
                    continue
            w = ex.early.pop(round, _MISSING)
            if w is _MISSING:
                return  # the partner's value has not come yet
            if round == LAST:
                ex.value = w  # the result, from the PE this one folded into
            else:
                ex.value = reducer.combine([ex.value, w] if rt.pe < peer else [w, ex.value])
            ex.stage += 1
            ex.sent = False
        del self.under_way[key]
        self.done(key, reducer.finish(ex.value) if reducer.finish is not None else ex.value)
