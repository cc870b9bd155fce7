"""Spanning trees over PEs, for broadcasts and reductions: pure arithmetic, no I/O.

A tree is defined by its members in order (``members[0]`` is the root) and a
fan-out; member at position ``q`` has children ``q*k+1 … q*k+k``. Every PE derives
its parent and children alone, so no PE stores more than its own links.
"""

from __future__ import annotations

from bisect import bisect_left

TYPE_CHECKING = False  # typing is for type checkers: a PE's start-up skips its import
if TYPE_CHECKING:
    from typing import Sequence

__all__ = ["Tree", "all_pes", "over"]


class Tree:
    """One PE's view of a spanning tree: its parent and children."""

    __slots__ = ("root", "parent", "children", "size")

    def __init__(self, root: int, parent: int, children: tuple, size: int):
        self.root = root
        self.parent = parent  # -1 at the root
        self.children = children
        self.size = size

    def __repr__(self) -> str:
        return f"Tree(root={self.root}, parent={self.parent}, children={self.children}, size={self.size})"


def _links(pos: int, n: int, fanout: int) -> tuple[int, list[int]]:
    parent = (pos - 1) // fanout if pos else -1
    first = pos * fanout + 1
    return parent, list(range(first, min(first + fanout, n)))


def all_pes(npes: int, root: int, me: int, fanout: int) -> Tree:
    """The tree over every PE, rooted at ``root``."""
    pos = (me - root) % npes
    parent, kids = _links(pos, npes, fanout)
    return Tree(
        root,
        (parent + root) % npes if parent >= 0 else -1,
        tuple((k + root) % npes for k in kids),
        npes,
    )


def over(members: Sequence[int], me: int, fanout: int) -> Tree | None:
    """The tree over the sorted PE list ``members`` (root: the first); None if ``me`` is not in it."""
    pos = bisect_left(members, me)
    if pos == len(members) or members[pos] != me:
        return None
    parent, kids = _links(pos, len(members), fanout)
    return Tree(members[0], members[parent] if parent >= 0 else -1, tuple(members[k] for k in kids), len(members))
