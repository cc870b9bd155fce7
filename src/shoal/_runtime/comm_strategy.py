"""The communication-aware strategy ``comm``: keep elements that talk much on one PE.

It grows each PE's share of the elements as a connected region of the communication
graph (the :class:`~.strategies.CommGraph` the runtime samples), balances the regions by
moves that cut the fewest bytes, then by load alone (``refine``'s steps), and smooths
their boundaries; where a refined current placement cuts about as few bytes, it keeps
that instead, so little migrates. Loaded with NumPy when a job asks for ``comm``.
"""

from __future__ import annotations

import heapq
from typing import NamedTuple

import numpy as np

from ..errors import ShoalError
from .setops import unique
from .strategies import TOLERANCE, CommGraph, checked_inputs, match_labels, pe_times, rebalance, threshold

__all__ = ["KEEP_CUT", "MESSAGE_COST_BYTES", "comm"]

MESSAGE_COST_BYTES = 1024.0  # comm weighs each message like this many bytes of payload
KEEP_CUT = 1.1  # comm keeps the (refined) current placement if its cut is at most this x a fresh one's


def comm(
    loads: np.ndarray,
    comm: CommGraph,
    placement: np.ndarray,
    num_pes: int,
    pe_speeds: np.ndarray,
    *,
    seed: int = 0,
    tolerance: float = TOLERANCE,
    message_cost: float = MESSAGE_COST_BYTES,
) -> np.ndarray:
    """Keep heavily communicating elements on one PE: grow each PE's share as a connected
    region (greedy graph growing), balance, smooth boundaries; keep a refined current
    placement instead when its cut is within KEEP_CUT of that, so little migrates."""
    loads, placement, speeds = checked_inputs(loads, placement, num_pes, pe_speeds)
    n, num_pes = loads.size, speeds.size
    if n == 0 or num_pes == 1:
        return np.zeros(n, dtype=np.int64)
    g = _adjacency(comm, n, message_cost)
    thr = threshold(loads, speeds, tolerance)

    fresh = _grow(loads, speeds, g)
    _balance_by_comm(loads, fresh, speeds, thr, g)
    rebalance(loads, fresh, speeds, thr)  # by load alone, where cut-aware moves ran out
    _smooth(loads, fresh, speeds, g)

    t_now, t_fresh = pe_times(loads, placement, speeds).max(), pe_times(loads, fresh, speeds).max()
    excess = np.maximum(pe_times(loads, placement, speeds) - thr, 0.0) @ speeds
    if excess <= 0.25 * loads.sum() or t_fresh > t_now:  # else keeping would migrate much anyway
        kept = placement.copy()
        rebalance(loads, kept, speeds, thr)
        _smooth(loads, kept, speeds, g)
        over_kept, over_fresh = max(pe_times(loads, kept, speeds).max(), thr), max(t_fresh, thr)
        if over_kept < over_fresh or (over_kept == over_fresh and _cut(kept, g) <= KEEP_CUT * _cut(fresh, g)):
            return kept
    return match_labels(fresh, placement, speeds)


class _Graph(NamedTuple):
    """Symmetric CSR adjacency: arrays for vectorised passes, lists for per-element loops."""

    indptr: list[int]
    nbr: list[int]
    wts: list[float]
    u: np.ndarray  # the source of each CSR entry
    v: np.ndarray
    w: np.ndarray


def _adjacency(graph: CommGraph, n: int, message_cost: float) -> _Graph:
    """Weight = bytes + messages x message_cost, both directions summed, self-edges dropped."""
    src = np.asarray(graph.src, dtype=np.int64)
    dst = np.asarray(graph.dst, dtype=np.int64)
    w = np.asarray(graph.nbytes, dtype=np.float64) + message_cost * np.asarray(graph.messages, dtype=np.float64)
    if not src.shape == dst.shape == w.shape or src.ndim != 1:
        raise ShoalError(f"CommGraph fields must be 1-D arrays of one length, not {src.shape}, {dst.shape}, {w.shape}")
    if src.size and (min(src.min(), dst.min()) < 0 or max(src.max(), dst.max()) >= n):
        raise ShoalError(f"CommGraph names an element outside 0..{n - 1}")
    keep = (src != dst) & (w > 0)
    keys, inv = unique(np.concatenate([src[keep] * n + dst[keep], dst[keep] * n + src[keep]]), return_inverse=True)
    sums = np.bincount(inv, weights=np.concatenate([w[keep], w[keep]]), minlength=keys.size)
    u, v = keys // n, keys % n
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(u, minlength=n), out=indptr[1:])
    return _Graph(indptr.tolist(), v.tolist(), sums.tolist(), u, v, sums)


def _cut(part: np.ndarray, g: _Graph) -> float:
    """Weight of the edges between PEs (each edge once)."""
    return float(g.w[part[g.u] != part[g.v]].sum()) / 2


def _grow(loads: np.ndarray, speeds: np.ndarray, g: _Graph) -> np.ndarray:
    """Fill PEs one after another, each from a seed next to the region before it, always
    adding the unplaced element with the most bytes to the region (first reached among
    equals, which grows compact blobs), until the PE holds its share of what is left."""
    n, num_pes = loads.size, speeds.size
    indptr, nbr, wts = g.indptr, g.nbr, g.wts
    lds = loads.tolist()
    part = [-1] * n
    conn = [0.0] * n
    mark = [-1] * n  # the region whose conn[e] is current
    left_load, left_speed = float(loads.sum()), float(speeds.sum())
    cursor = 0  # elements before it are placed: seeds for unconnected regions
    tick = 0
    seed_el = -1
    push, pop = heapq.heappush, heapq.heappop
    for k in range(num_pes):
        last = k == num_pes - 1
        cap = float("inf") if last else left_load * float(speeds[k]) / left_speed
        acc = 0.0
        heap: list[tuple[float, int, int]] = []
        if seed_el >= 0:
            heap.append((0.0, 0, seed_el))
        while True:
            if not heap:
                while cursor < n and part[cursor] >= 0:
                    cursor += 1
                if cursor == n:
                    break
                heap.append((0.0, tick, cursor))
            negc, _, e = pop(heap)
            if part[e] >= 0:
                continue
            le = lds[e]
            if acc + le > cap and acc + le - cap > cap - acc and acc > 0:
                push(heap, (negc, -1, e))  # adding it overshoots more than leaving it out
                break
            part[e] = k
            acc += le
            for j in range(indptr[e], indptr[e + 1]):
                x = nbr[j]
                if part[x] < 0:
                    if mark[x] != k:
                        mark[x], conn[x] = k, 0.0
                    conn[x] += wts[j]
                    tick += 1
                    push(heap, (-conn[x], tick, x))
            if acc >= cap:
                break
        left_load -= acc
        left_speed -= float(speeds[k])
        seed_el = -1
        while heap:  # the next region starts where this one's frontier is strongest
            _, _, e = pop(heap)
            if part[e] < 0:
                seed_el = e
                break
    return np.array(part, dtype=np.int64)


def _links(e: int, part: np.ndarray, g: _Graph) -> dict[int, float]:
    """Bytes between element ``e`` and each PE."""
    c: dict[int, float] = {}
    nbr, wts = g.nbr, g.wts
    for j in range(g.indptr[e], g.indptr[e + 1]):
        q = int(part[nbr[j]])
        c[q] = c.get(q, 0.0) + wts[j]
    return c


def _balance_by_comm(loads: np.ndarray, part: np.ndarray, speeds: np.ndarray, thr: float, g: _Graph) -> None:
    """While some PE is above ``thr``, move the element off the most loaded PE whose move to
    a PE with room cuts the fewest extra bytes (preferring the heavier among equals). Stops
    after scanning ~10 x the graph's size, leaving the rest to ``rebalance``."""
    times = pe_times(loads, part, speeds)
    members: dict[int, set[int]] = {}
    budget = 10 * (loads.size + len(g.nbr))
    for _ in range(loads.size):
        p = int(np.argmax(times))
        if times[p] <= thr:
            return
        if p not in members:
            members[p] = set(np.flatnonzero(part == p).tolist())
        budget -= len(members[p])
        if budget < 0:
            return
        q0 = int(np.argmin(times))
        best: tuple[float, float, int, int] | None = None
        for e in sorted(members[p]):
            le = float(loads[e])
            if le <= 0:
                continue
            c = _links(e, part, g)
            own = c.get(p, 0.0)
            for q in (*c, q0):
                if q != p and times[q] + le / speeds[q] <= thr:
                    cand = (c.get(q, 0.0) - own, le, -e, -q)
                    if best is None or cand > best:
                        best = cand
        if best is None:
            return
        e, q, le = -best[2], -best[3], best[1]
        members[p].discard(e)
        if q in members:
            members[q].add(e)
        part[e] = q
        times[p] -= le / speeds[p]
        times[q] += le / speeds[q]


def _smooth(loads: np.ndarray, part: np.ndarray, speeds: np.ndarray, g: _Graph, passes: int = 3) -> None:
    """Move boundary elements in place to the PE holding more of their bytes where that PE
    stays under the current maximum time: cut bytes fall and the maximum never rises."""
    n, num_pes = loads.size, speeds.size
    u, v, w = g.u, g.v, g.w
    if u.size == 0:
        return
    times = pe_times(loads, part, speeds)
    thr = float(times.max())
    for _ in range(passes):
        keys, inv = unique(u * num_pes + part[v], return_inverse=True)
        bytes_to = np.bincount(inv, weights=w)
        el, pe = keys // num_pes, keys % num_pes
        own = np.zeros(n)
        mine = pe == part[el]
        own[el[mine]] = bytes_to[mine]
        gain = np.where(mine, -np.inf, bytes_to - own[el])
        best = np.full(n, -np.inf)
        np.maximum.at(best, el, gain)
        cand = np.flatnonzero(best > 0)
        moved = 0
        for e in cand[np.argsort(-best[cand], kind="stable")].tolist():
            p = int(part[e])
            c = _links(e, part, g)
            own_e = c.get(p, 0.0)
            le = float(loads[e])
            best_q, best_gain = -1, 0.0
            for q, cq in sorted(c.items()):
                if q != p and cq - own_e > best_gain and times[q] + le / speeds[q] <= thr:
                    best_q, best_gain = q, cq - own_e
            if best_q >= 0:
                part[e] = best_q
                times[p] -= le / speeds[p]
                times[best_q] += le / speeds[best_q]
                moved += 1
        if not moved:
            return
