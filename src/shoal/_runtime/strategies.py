"""The built-in load-balancing strategies by load, and what every strategy is given and checked by.

A strategy is called as ``strategy(loads, comm, placement, num_pes, pe_speeds, seed=0)``
and returns a new ``int64[n]`` array giving each element's PE. ``loads`` are the seconds
each element spent in entry methods since the last balancing step; ``comm`` is a
:class:`CommGraph`; ``pe_speeds`` are relative PE speeds (only ratios matter, see
:func:`background_speeds`), so strategies balance *time*, ``load / speed``. Nothing here
does I/O or touches the runtime: the runtime measures, finds a strategy by name
(``strategy_registry.py``), checks the result with :func:`check_placement` and migrates.

Here: ``auto`` (the default: moves only what pays), ``greedy`` (from scratch, heaviest
first), ``refine`` (few moves from the current placement), ``rotate`` and ``random`` (for
tests), and the steps they share with ``comm`` (``comm_strategy.py``). NumPy is imported
at the top: this module loads only when a job asks for a strategy, at start-up of a job
with ``--lb``.
"""

from __future__ import annotations

import heapq
from bisect import bisect_left, bisect_right
from typing import Any, NamedTuple

import numpy as np

from ..errors import ShoalError
from .setops import unique
from .strategy_reasons import BETTER, ENOUGH, NEEDED, NO_GAIN, NOTHING, UNDER, UNPAID, Reason, judge

TYPE_CHECKING = False  # the imports below are for type checkers only
if TYPE_CHECKING:
    from collections.abc import Callable

    from .strategy_registry import Strategy

__all__ = [
    "TOLERANCE",
    "CommGraph",
    "REASONED",
    "auto",
    "auto_reasoned",
    "background_speeds",
    "check_placement",
    "checked_inputs",
    "greedy",
    "match_labels",
    "pe_times",
    "random",
    "rebalance",
    "refine",
    "rotate",
    "threshold",
]

TOLERANCE = 0.05  # refine/comm/auto stop once no PE's time is above (1 + TOLERANCE) * average


class CommGraph(NamedTuple):
    """Communication between elements since the last balancing step; element numbers are positions 0..n-1."""

    src: np.ndarray  # int64[m]
    dst: np.ndarray  # int64[m]
    messages: np.ndarray  # int64[m]
    nbytes: np.ndarray  # int64 or float64[m]

    @classmethod
    def empty(cls) -> CommGraph:
        """A graph with no edges, for strategies that ignore communication."""
        z = np.zeros(0, dtype=np.int64)
        return cls(z, z, z, z)


# --- inputs and results ----------------------------------------------------------------


def checked_inputs(loads: Any, placement: Any, num_pes: int, pe_speeds: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Validated float64 loads, int64 placement and float64 speeds (copies where converted)."""
    if isinstance(num_pes, bool) or not isinstance(num_pes, (int, np.integer)) or num_pes < 1:
        raise ShoalError(f"num_pes must be a positive integer, not {num_pes!r}")
    num_pes = int(num_pes)
    loads = np.asarray(loads, dtype=np.float64)
    placement = np.asarray(placement)
    speeds = np.asarray(pe_speeds, dtype=np.float64)
    if loads.ndim != 1 or placement.shape != loads.shape:
        raise ShoalError(f"loads and placement must be 1-D arrays of one length, not shapes {loads.shape} and {placement.shape}")
    if placement.size and (placement.dtype.kind not in "iu" or placement.min() < 0 or placement.max() >= num_pes):
        raise ShoalError(f"placement must hold integer PEs in [0, {num_pes}); got dtype {placement.dtype}")
    if speeds.shape != (num_pes,):
        raise ShoalError(f"pe_speeds must have one entry per PE ({num_pes}), not shape {speeds.shape}")
    if not np.all(np.isfinite(loads)) or (loads.size and loads.min() < 0):
        raise ShoalError("loads must be finite and non-negative (seconds per element)")
    if not np.all(np.isfinite(speeds)) or speeds.min() <= 0:
        raise ShoalError(f"pe_speeds must be finite and positive; got {speeds.tolist()[:8]}")
    return loads, placement.astype(np.int64), speeds


def check_placement(new: Any, n: int, num_pes: int, strategy_name: str) -> np.ndarray:
    """Return a strategy's result as ``int64[n]`` with values in [0, num_pes), or raise
    ShoalError naming the strategy and what is wrong with what it returned."""
    where = f"load-balancing strategy {strategy_name!r}"
    arr = np.asarray(new)
    if arr.ndim != 1 or arr.shape[0] != n:
        raise ShoalError(f"{where} returned shape {arr.shape}; it must return one PE per element, shape ({n},)")
    if arr.dtype.kind not in "iu":
        raise ShoalError(f"{where} returned dtype {arr.dtype}; it must return integer PE numbers (use .astype(np.int64))")
    if n and (arr.min() < 0 or arr.max() >= num_pes):
        bad = int(np.flatnonzero((arr < 0) | (arr >= num_pes))[0])
        raise ShoalError(f"{where} placed element {bad} on PE {int(arr[bad])}; PEs are 0..{num_pes - 1}")
    return arr.astype(np.int64)


def background_speeds(wall: Any, busy: Any, idle: Any, *, floor: float = 0.05) -> np.ndarray:
    """Relative PE speeds from per-PE times measured over one balancing period.

    ``wall`` is the period's wall time, ``idle`` the wall time the PE waited for messages,
    ``busy`` the time it spent running shoal work. As in Charm++, the background load is
    ``wall - idle - busy``: time the PE wanted the core but another process had it. It is
    taken as a fraction of the time the PE was not idle, so

        speed = busy / (wall - idle) = 1 - background / (wall - idle),

    clamped to [floor, 1]. With no idle time this is Charm++'s ``1 - background / wall``;
    with idle time it still gives the share of the core the PE gets while it works (a
    half-shared core reads 0.5 however idle the PE was). A PE never busy (wall - idle ~ 0)
    carries no evidence and reads 1.0. Accurate when ``busy`` is CPU time.
    """
    w, b, i = np.broadcast_arrays(*(np.asarray(x, dtype=np.float64) for x in (wall, busy, idle)))
    if not 0 < floor <= 1:
        raise ShoalError(f"floor must be in (0, 1], not {floor!r}")
    active = w - i
    with np.errstate(divide="ignore", invalid="ignore"):
        speed = np.where(active > 1e-9 * np.maximum(w, 1e-300), b / active, 1.0)
    return np.clip(np.nan_to_num(speed, nan=1.0), floor, 1.0)


def pe_times(loads: np.ndarray, placement: np.ndarray, speeds: np.ndarray) -> np.ndarray:
    """Each PE's time: the loads of its elements over its speed."""
    return np.bincount(placement, weights=loads, minlength=speeds.size) / speeds


# --- greedy ----------------------------------------------------------------------------


def greedy(loads: np.ndarray, comm: CommGraph, placement: np.ndarray, num_pes: int, pe_speeds: np.ndarray, *, seed: int = 0) -> np.ndarray:
    """Heaviest element first onto the PE where it would finish first (time so far +
    load/speed). Ignores the current placement, so most elements move; ties go to the lower PE."""
    loads, placement, speeds = checked_inputs(loads, placement, num_pes, pe_speeds)
    return _greedy(loads, speeds)


def _greedy(loads: np.ndarray, speeds: np.ndarray) -> np.ndarray:
    """One heap of (time, PE) per speed class; each element goes to the class head where it
    finishes first. Classes are the distinct speeds when few (exact: with one speed this
    is plain LPT), else 20%-wide speed bands (the head is then near-best in its band)."""
    order = np.argsort(-loads, kind="stable").tolist()
    distinct = unique(speeds)
    if distinct.size <= 16:
        cls = np.searchsorted(distinct, speeds)
    else:
        cls = unique(np.floor(np.log(speeds) / np.log(1.2)), return_inverse=True)[1]
    heaps = [[(0.0, p) for p in np.flatnonzero(cls == c).tolist()] for c in range(int(cls.max()) + 1)]
    inv = (1.0 / speeds).tolist()
    lds = loads.tolist()
    new = [0] * loads.size
    replace = heapq.heapreplace
    if len(heaps) == 1:
        heap = heaps[0]
        for e in order:
            t, p = heap[0]
            new[e] = p
            replace(heap, (t + lds[e] * inv[p], p))
        return np.array(new, dtype=np.int64)
    for e in order:
        le = lds[e]
        best_f, best_p, best_h = float("inf"), -1, heaps[0]
        for h in heaps:
            t, p = h[0]
            f = t + le * inv[p]
            if f < best_f or (f == best_f and p < best_p):
                best_f, best_p, best_h = f, p, h
        new[e] = best_p
        replace(best_h, (best_f, best_p))
    return np.array(new, dtype=np.int64)


# --- refine ----------------------------------------------------------------------------


def refine(loads: np.ndarray, comm: CommGraph, placement: np.ndarray, num_pes: int, pe_speeds: np.ndarray, *, seed: int = 0, tolerance: float = TOLERANCE) -> np.ndarray:
    """Move a few elements off PEs above (1 + tolerance) x the average time onto the least
    loaded PEs, starting from the current placement, so little migrates."""
    loads, placement, speeds = checked_inputs(loads, placement, num_pes, pe_speeds)
    new = placement.copy()
    rebalance(loads, new, speeds, threshold(loads, speeds, tolerance))
    return new


def threshold(loads: np.ndarray, speeds: np.ndarray, tolerance: float) -> float:
    """The time no PE should exceed: (1 + tolerance) x the average, load over speed."""
    return (1.0 + tolerance) * float(loads.sum()) / float(speeds.sum())


def rebalance(loads: np.ndarray, part: np.ndarray, speeds: np.ndarray, thr: float) -> int:
    """Move elements in place from the most loaded PE to the one with most room until no
    PE's time exceeds ``thr`` or no single move lowers the maximum; return how many moved.

    Each move takes the smallest element that brings the donor under ``thr`` while the
    receiver stays under it, else the largest that fits, else the one that best evens the
    pair. Every move lowers the sorted vector of PE times, so the loop ends."""
    num_pes = speeds.size
    if num_pes < 2 or loads.size == 0:
        return 0
    times = pe_times(loads, part, speeds)
    by_pe = np.lexsort((np.arange(loads.size), loads, part))  # by PE, then load, then element
    starts = np.searchsorted(part[by_pe], np.arange(num_pes + 1))
    received: dict[int, list[tuple[float, int]]] = {}
    donors: dict[int, tuple[list[float], list[int]]] = {}

    def donor(p: int) -> tuple[list[float], list[int]]:
        if p not in donors:
            ids = by_pe[starts[p] : starts[p + 1]]
            pairs = list(zip(loads[ids].tolist(), ids.tolist()))
            pairs += received.pop(p, [])
            pairs.sort()
            donors[p] = ([a for a, _ in pairs], [b for _, b in pairs])
        return donors[p]

    same_speed = bool(speeds.min() == speeds.max())
    moves = 0
    for _ in range(2 * (loads.size + num_pes)):  # a bound the descent never reaches
        p = int(np.argmax(times))
        tp = float(times[p])
        if tp <= thr:
            break
        q = int(np.argmin(times)) if same_speed else int(np.argmax((thr - times) * speeds))  # most room
        tq, sp, sq = float(times[q]), float(speeds[p]), float(speeds[q])
        lds, ids = donor(p)
        room = (thr - tq) * sq
        i = bisect_left(lds, (tp - thr) * sp)
        if i < len(lds) and lds[i] <= room:
            pick = i
        else:
            pick = bisect_right(lds, room) - 1
            if pick < 0 or lds[pick] <= 0:  # nothing fits: even out a pair if that helps
                j = bisect_right(lds, (tp - tq) / (1.0 / sp + 1.0 / sq))
                best = (tp, -1, -1)
                for k in {j - 1, j, bisect_right(lds, 0.0)}:
                    if 0 <= k < len(lds) and lds[k] > 0:
                        finish = times + lds[k] / speeds
                        finish[p] = np.inf
                        r = int(np.argmin(finish))
                        best = min(best, (max(tp - lds[k] / sp, float(finish[r])), k, r))
                if best[1] < 0:
                    break
                pick, q = best[1], best[2]
                sq = float(speeds[q])
        load, e = lds.pop(pick), ids.pop(pick)
        part[e] = q
        times[p] -= load / sp
        times[q] += load / sq
        if q in donors:
            k = bisect_left(donors[q][0], load)
            donors[q][0].insert(k, load)
            donors[q][1].insert(k, e)
        else:
            received.setdefault(q, []).append((load, e))
        moves += 1
    return moves


# --- keeping elements where they are ----------------------------------------------------


def match_labels(part: np.ndarray, placement: np.ndarray, speeds: np.ndarray) -> np.ndarray:
    """Renumber the regions (each built for one PE's speed) among PEs of equal speed so
    that as many elements as possible stay where they are: greedy matching on overlap."""
    num_pes = speeds.size
    _, group = unique(speeds, return_inverse=True)
    keys, counts = unique(part * num_pes + placement, return_counts=True)
    a, b = keys // num_pes, keys % num_pes
    same = group[a] == group[b]
    a, b, counts = a[same], b[same], counts[same]
    order = np.lexsort((b, a, -counts))
    label = [-1] * num_pes
    taken = [False] * num_pes
    for ra, pb in zip(a[order].tolist(), b[order].tolist()):
        if label[ra] < 0 and not taken[pb]:
            label[ra], taken[pb] = pb, True
    free: dict[int, list[int]] = {}
    for pb in range(num_pes):
        if not taken[pb]:
            free.setdefault(int(group[pb]), []).append(pb)
    for ra in range(num_pes):
        if label[ra] < 0:
            label[ra] = free[int(group[ra])].pop(0)
    return np.asarray(label, dtype=np.int64)[part]


# --- auto: the default ---------------------------------------------------------------

#: auto moves more than this share of the elements only where the move pays for itself in one period
MOVE_SHARE = 0.10
#: what auto assumes a migration costs: bytes per second of an element's state moved (pack,
#: send, unpack), and seconds per element besides (its messages, the location protocol)
MOVE_RATE = 1.0e9
MOVE_OVERHEAD = 2.0e-4
#: an element's state when its size is not known (bytes)
DEFAULT_SIZE = 4096.0


def auto(loads: np.ndarray, comm: CommGraph, placement: np.ndarray, num_pes: int, pe_speeds: np.ndarray, *,
         seed: int = 0, sizes: np.ndarray | None = None) -> np.ndarray:
    """The default: move only what pays. Nothing moves while no PE's time is above
    (1 + TOLERANCE) x the average. Otherwise refine's few moves where they bring every PE
    under that bound, else the better of refine and greedy (renumbered to keep what it can
    in place) by time saved per period less the cost of moving (``sizes``: each element's
    bytes); a plan that moves more than MOVE_SHARE of the elements is taken only if it
    saves more in one period than its moves cost. :func:`auto_reasoned` says which and why."""
    return auto_reasoned(loads, comm, placement, num_pes, pe_speeds, seed=seed, sizes=sizes)[0]


def auto_reasoned(loads: np.ndarray, comm: CommGraph, placement: np.ndarray, num_pes: int, pe_speeds: np.ndarray, *,
                  seed: int = 0, sizes: np.ndarray | None = None) -> tuple[np.ndarray, Reason]:
    """:func:`auto`'s placement and its :class:`~.strategy_reasons.Reason`: which plan it took
    (nothing, refine or greedy), why, and the time it estimated the plan saves and costs."""
    loads, placement, speeds = checked_inputs(loads, placement, num_pes, pe_speeds)
    before = float(pe_times(loads, placement, speeds).max(initial=0.0))
    thr = threshold(loads, speeds, TOLERANCE) if loads.size else 0.0
    if loads.size == 0 or before <= thr:
        return placement.copy(), judge("auto", loads, placement, placement, speeds, TOLERANCE, NOTHING, UNDER)
    size = np.full(loads.size, DEFAULT_SIZE) if sizes is None else np.asarray(sizes, dtype=np.float64)
    if size.shape != loads.shape:
        raise ShoalError(f"sizes must give each element's bytes (shape {loads.shape}), not shape {size.shape}")
    best, best_net, taken = placement.copy(), 0.0, NOTHING
    weighed: tuple[str, float, float] | None = None  # the plan refused or taken: (name, saved, cost)
    few = refine(loads, comm, placement, speeds.size, speeds)
    _swap_down(loads, few, speeds, thr)
    refine_after = float(pe_times(loads, few, speeds).max())
    for name, new in (("refine", few), ("greedy", match_labels(_greedy(loads, speeds), placement, speeds))):
        moved = new != placement
        after = float(pe_times(loads, new, speeds).max())
        saved = before - after
        cost = MOVE_OVERHEAD * int(moved.sum()) + float(size[moved].sum()) / MOVE_RATE
        if moved.sum() > MOVE_SHARE * loads.size and saved <= cost:
            if taken == NOTHING and saved > 0 and (weighed is None or saved > weighed[1]):
                weighed = (name, saved, cost)
            continue  # a large move that would not pay for itself within one period
        if saved - cost > best_net:
            best, best_net, taken, weighed = new, saved - cost, name, (name, saved, cost)
            if after <= thr:
                break  # refine's few moves balance it: greedy's many are not needed
    if taken == "refine":
        why = ENOUGH if refine_after <= thr else BETTER
    elif taken == "greedy":
        why = NEEDED
    else:
        why = UNPAID if weighed is not None else NO_GAIN
    if weighed is None:
        return best, judge("auto", loads, placement, best, speeds, TOLERANCE, taken, why)
    name, saved, cost = weighed
    return best, judge("auto", loads, placement, best, speeds, TOLERANCE, taken, why, saved, cost,
                       weighed="" if name == taken else name)


def _swap_down(loads: np.ndarray, part: np.ndarray, speeds: np.ndarray, thr: float) -> int:
    """Swap pairs in place where moving one element cannot help (each is larger than any
    PE's room): an element of the slowest PE for a lighter one of the PE with most room,
    the pair chosen to even their two times, while that lowers the maximum; the swaps made.
    Each swap moves two elements, so a balanced placement stays near the one given."""
    num_pes = speeds.size
    if num_pes < 2 or loads.size < 2:
        return 0
    times = pe_times(loads, part, speeds)
    swaps = 0
    for _ in range(loads.size):
        p = int(np.argmax(times))
        tp = float(times[p])
        if tp <= thr:
            break
        q = int(np.argmax((thr - times) * speeds))
        tq, sp, sq = float(times[q]), float(speeds[p]), float(speeds[q])
        mine, theirs = np.flatnonzero(part == p), np.flatnonzero(part == q)
        if not mine.size or not theirs.size:
            break
        order = theirs[np.argsort(loads[theirs], kind="stable")]
        sorted_q = loads[order]
        even = (tp - tq) / (1.0 / sp + 1.0 / sq)  # the load difference that evens the pair
        want = np.clip(np.searchsorted(sorted_q, loads[mine] - even), 0, order.size - 1)
        best, pick = tp, None
        for i, e in enumerate(mine.tolist()):
            for k in (int(want[i]) - 1, int(want[i])):
                if 0 <= k < order.size and sorted_q[k] < loads[e]:
                    f = int(order[k])
                    d = float(loads[e] - loads[f])
                    worst = max(tp - d / sp, tq + d / sq)
                    if worst < best - 1e-12:
                        best, pick = worst, (e, f, d)
        if pick is None:
            break
        e, f, d = pick
        part[e], part[f] = q, p
        times[p] -= d / sp
        times[q] += d / sq
        swaps += 1
    return swaps


# --- test strategies -------------------------------------------------------------------


def rotate(loads: np.ndarray, comm: CommGraph, placement: np.ndarray, num_pes: int, pe_speeds: np.ndarray, *, seed: int = 0) -> np.ndarray:
    """Every element to the next PE, (pe + 1) % num_pes: migrates everything, for tests."""
    loads, placement, speeds = checked_inputs(loads, placement, num_pes, pe_speeds)
    return (placement + 1) % speeds.size


def random(loads: np.ndarray, comm: CommGraph, placement: np.ndarray, num_pes: int, pe_speeds: np.ndarray, *, seed: int = 0) -> np.ndarray:
    """Each element to a uniformly random PE, reproducible from ``seed``: for tests."""
    loads, placement, speeds = checked_inputs(loads, placement, num_pes, pe_speeds)
    return np.random.default_rng(seed).integers(0, speeds.size, size=loads.size, dtype=np.int64)


# --- reasons ---------------------------------------------------------------------------

#: the strategies that say which plan they took and why: each with its reasoned variant
REASONED: dict[Strategy, Callable[..., tuple[np.ndarray, Reason]]] = {auto: auto_reasoned}
