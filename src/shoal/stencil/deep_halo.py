"""Communication-avoiding passes: one deep ghost exchange, then several steps per tile.

With several tiles, a plain backend loop exchanges ghost layers before each step that
reads across a tile's edge, and every step is a pass of its own over memory. A *deep
pass* runs ``k`` steps between two exchanges instead. Before it, each tile receives
ghost layers deep enough for all ``k`` steps (about ``k * r`` layers for a loop whose
statements read ``r`` points away); then each statement computes its box extended into
the ghosts by the *margin* that the statements after it read there. The margins shrink
by ``r`` per step, down to the owned box (or what later operations expect to find valid
in the ghosts) at the end of the pass. The points in the margins are the neighbour's:
they are computed here again, redundantly, by the same compiled kernel from the same
operands as on the neighbour, so every point gets NumPy's value bit for bit. The steps
of a pass then run as a wavefront (:mod:`shoal.stencil.blocking`).

The margins come from a backward analysis over the operations of the pass
(:func:`plan_pass`), per axis and side, with ghost validity modelled as a box: field
``f`` is valid on the owned box grown by ``need[f]`` layers.

* At the end, each field must be valid as far as the plain order would leave it valid
  (the exchanges after its last write in the pass): later steps and the convergence
  check's reduction count on those ghosts.
* Going back over a statement: it computes its box grown by ``e``, the largest margin
  its targets must be valid on after it; each read ``(f, offset)`` then needs ``f``
  valid on the box grown by ``e`` and shifted by the offset. Its targets must already
  be valid where they were needed (their points outside the statement's box are not
  rewritten: the global boundary, for one), so their margins never shrink going back.
* What is needed at the start is the deep exchange. The pass is possible when it fits
  the ghost layers the tiles hold (:func:`ghost_depths`).

The analysis depends only on the statements and on which axes are split into tiles,
not on the tile, so every tile chooses the same passes and the same exchanges; the
boxes (:meth:`DeepLoop.pass_for`) are the tile's own, clipped to the statement's box,
so no point outside it (the grid's boundary, a strided box's gaps) is ever written.
"""

from __future__ import annotations

from typing import Mapping, NamedTuple, Sequence

from .blocking import MAX_DEPTH
from .interface import GridSpec
from .lowering import tile_box

__all__ = ["Use", "PassPlan", "Pass", "applies", "plan_pass", "ghost_depths", "DeepLoop", "OWNED_PER_GHOST"]

#: a tile holds at most one deep ghost layer per this many owned layers along a split
#: axis: the redundant work of a pass of k steps is about k * r / (owned layers) of it
OWNED_PER_GHOST = 4

Margins = tuple[tuple[int, int], ...]  # (low side, high side) layers, per axis


class Use(NamedTuple):
    """What a statement of a loop body writes and reads, as the analysis needs it."""

    targets: tuple[int, ...]  # the fields it writes (a statement group writes several)
    accesses: tuple  # (field, offsets per axis) of every read
    box: tuple  # its global box: (first, step, count) per axis


class PassPlan(NamedTuple):
    """A deep pass, the same on every tile."""

    exchange: tuple  # ((field, low depths, high depths), ...): the exchange before the pass
    margins: tuple[Margins, ...]  # per statement of the pass, in order
    depth: int  # the deepest ghost layer the exchange fills


class Pass(NamedTuple):
    """A deep pass on one tile."""

    plan: PassPlan
    sids: tuple[int, ...]  # statements of the pass, in order
    boxes: tuple  # per statement: its tile-local box, grown by its margin (None: empty here)
    steps: tuple[tuple[int, int], ...]  # per step of the pass: its slice of sids/boxes
    redundant: int  # points computed outside the owned box


def applies(spec: GridSpec, dims: Sequence[int]) -> bool:
    """Whether deep passes may run on a grid tiled ``dims``: more than one tile, 2 or
    more axes, compiled kernels on a CPU, ``time_blocking`` on. (Each loop also needs
    all its statements compiled and none through a scratch box: :class:`DeepLoop`'s
    caller checks.) Elsewhere tiles hold ``ghost_depth`` layers and exchange every step."""
    tiles = 1
    for d in dims:
        tiles *= d
    return tiles > 1 and len(dims) >= 2 and spec.device == "cpu" and spec.time_blocking and spec.backend == "c"


def ghost_depths(shape: Sequence[int], dims: Sequence[int], ghost: int, deep: bool) -> tuple[int, ...]:
    """Ghost layers per axis a tile allocates: ``ghost`` (the user's ``ghost_depth``),
    and where deep passes may run, on each axis split into tiles up to ``MAX_DEPTH *
    ghost``, at most one per ``OWNED_PER_GHOST`` points of the thinnest tile (which
    also keeps them within what a neighbour owns). Every tile gets the same depths."""
    out = []
    for n, d in zip(shape, dims):
        if not deep or d == 1:
            out.append(ghost)
        else:
            out.append(max(ghost, min(MAX_DEPTH * ghost, (n // d) // OWNED_PER_GHOST)))
    return tuple(out)


def plan_pass(ops: Sequence[tuple], uses: Mapping[int, Use], split: Sequence[bool],
              limit: Sequence[int]) -> PassPlan | None:
    """The deep pass running ``ops`` (the operations of its steps, in order: exchanges
    ``("x", items, corners)`` and statements ``("s", sid)``), or None if it needs more
    than ``limit`` ghost layers on an axis that is ``split``."""
    d = len(split)
    need: dict[int, list[list[int]]] = {}
    for op in ops:  # what the plain order leaves valid at the end
        if op[0] == "x":
            for f, lo, hi in op[1]:
                need[f] = [[lo[a], hi[a]] if split[a] else [0, 0] for a in range(d)]
        else:
            for t in uses[op[1]].targets:
                need[t] = [[0, 0] for _ in range(d)]
    margins: list[Margins] = []
    for op in reversed(ops):
        if op[0] != "s":
            continue
        use = uses[op[1]]
        e = [[max((need[t][a][s] for t in use.targets if t in need), default=0) for s in (0, 1)]
             for a in range(d)]
        for f, off in use.accesses:
            req = need.setdefault(f, [[0, 0] for _ in range(d)])
            for a in range(d):
                if split[a]:
                    req[a][0] = max(req[a][0], e[a][0] - off[a])
                    req[a][1] = max(req[a][1], e[a][1] + off[a])
        margins.append(tuple((lo, hi) for lo, hi in e))
    margins.reverse()
    if any(req[a][s] > limit[a] for req in need.values() for a in range(d) for s in (0, 1)):
        return None
    items = tuple((f, tuple(r[0] for r in req), tuple(r[1] for r in req))
                  for f, req in sorted(need.items()) if any(x for r in req for x in r))
    depth = max((x for _, lo, hi in items for x in (*lo, *hi)), default=0)
    return PassPlan(items, tuple(margins), depth)


class DeepLoop:
    """The deep passes of one loop body on one tile: how many steps a pass may run from
    each step of the body (the same on every tile), and each pass's exchange and boxes
    here. ``body`` holds the operations of each step; ``sides`` the (axis, side) pairs
    where this tile has a neighbour (margins grow only there)."""

    def __init__(self, body: Sequence[tuple], uses: Mapping[int, Use], split: Sequence[bool],
                 ghosts: Sequence[int], lo: Sequence[int], hi: Sequence[int], sides: set[tuple[int, int]]):
        self.body = [tuple(ops) for ops in body]
        self.uses = uses
        self.split = tuple(split)
        self.ghosts = tuple(ghosts)
        self.lo, self.hi = tuple(lo), tuple(hi)
        self.sides = sides
        self.longest: dict[int, int] = {}
        self.passes: dict[tuple[int, int], Pass] = {}

    def _ops(self, start: int, count: int) -> list[tuple]:
        p = len(self.body)
        return [op for j in range(count) for op in self.body[(start + j) % p]]

    def steps(self, start: int) -> int:
        """The most steps (at most ``MAX_DEPTH``) a pass starting at step ``start`` of
        the body may run with the ghost layers the tiles hold; under 2: no deep pass."""
        k = self.longest.get(start)
        if k is None:
            k = 0
            for count in range(1, MAX_DEPTH + 1):
                if plan_pass(self._ops(start, count), self.uses, self.split, self.ghosts) is None:
                    break
                k = count
            self.longest[start] = k
        return k

    def pass_for(self, start: int, count: int) -> Pass:
        """The pass of ``count`` steps from step ``start`` (``count <= steps(start)``)."""
        key = (start, count)
        found = self.passes.get(key)
        if found is not None:
            return found
        ops = self._ops(start, count)
        the_plan = plan_pass(ops, self.uses, self.split, self.ghosts)
        assert the_plan is not None, (start, count)
        sids = tuple(op[1] for op in ops if op[0] == "s")
        boxes = []
        redundant = 0
        for sid, m in zip(sids, the_plan.margins):
            here = tuple((lo if (a, -1) in self.sides else 0, hi if (a, 1) in self.sides else 0)
                         for a, (lo, hi) in enumerate(m))
            box = self.uses[sid].box
            grown = tile_box(box, self.lo, self.hi, self.ghosts, here)
            owned = tile_box(box, self.lo, self.hi, self.ghosts)
            redundant += _points(grown) - _points(owned)
            boxes.append(grown)
        p = len(self.body)
        steps, i = [], 0
        for j in range(count):
            n = sum(1 for op in self.body[(start + j) % p] if op[0] == "s")
            steps.append((i, i + n))
            i += n
        found = self.passes[key] = Pass(the_plan, sids, tuple(boxes), tuple(steps), redundant)
        return found


def _points(box: tuple | None) -> int:
    if box is None:
        return 0
    n = 1
    for _, count in box:
        n *= count
    return n
