"""What one PE holds of a reduction, and the order its values combine in.

A :class:`Partial` collects the values of one reduction on one PE: its own elements'
contributions and its children's partial results. Values of a reducer whose result
depends on the order (a float sum, a NaN's payload, which of two ties ``max`` keeps)
carry keys and combine in key order, not in the order they arrived, so every run on the
same PEs and elements gives the same bits. An ordered reducer (``gather``) puts its
values in order itself: ``(key, value)`` pairs, or :class:`Block` runs of a dense array's
consecutive elements with no key per value.
"""

from __future__ import annotations

import operator

TYPE_CHECKING = False  # typing is for type checkers: a PE's start-up skips its import
if TYPE_CHECKING:
    from typing import Any

    from .chare import Chare

from .collections import row_major
from .reducers import Reducer, reducers

__all__ = ["Partial", "keyed", "by_key", "Block", "PENDING", "in_order", "order_key"]


class Partial:
    """One PE's progress on one reduction. ``keys`` says where each value of an unordered
    reducer goes: an element's index (its own and those away from home) or, after them,
    the child PE that sent it (see :func:`by_key`)."""

    __slots__ = ("values", "keys", "got", "own", "reducer", "target", "section", "entry")

    def __init__(self, reducer: Reducer, target: Any, section: Any):
        self.values: list = []
        self.keys: list = []
        self.got = 0
        self.own = 0  # of `got`: contributions of this PE's own elements (not children's partials)
        self.reducer = reducer
        self.target = target
        self.section = section
        self.entry = -1  # a ret=True broadcast's: its entry method, to name a reply that cannot travel


#: built-ins whose result does not depend on the order values combine in: their values
#: need no key; the others' do (floats round, NaN payloads and max's ties differ)
_ORDER_FREE = frozenset({reducers.nop, reducers.logical_and, reducers.logical_or, reducers.exact_sum})


def keyed(reducer: Reducer) -> bool:
    """Whether the values of ``reducer`` carry keys: not those of an ordered reducer, which
    puts them in order itself, nor of one that any order gives alike."""
    return not (reducer.ordered or reducer in _ORDER_FREE)


def by_key(p: Partial) -> list:
    """``p``'s values in the order of their keys."""
    values, keys = p.values, p.keys
    if len(keys) != len(values):
        return values  # no keys: an order-free or ordered reducer
    try:
        if all(map(operator.le, keys, keys[1:])):
            return values  # the common case: they came in order
        return [values[i] for i in sorted(range(len(keys)), key=keys.__getitem__)]
    except TypeError:  # indices that do not compare: arrival order
        return values


class Block:
    """The values of a run of consecutive elements of a dense array, in row-major order
    from element number ``first`` (a ``ret=True`` broadcast's part from one PE whose
    elements are its block as created: no index travels with each value). A value that
    is ``PENDING`` came separately, as an ``(index, value)`` pair."""

    __slots__ = ("first", "values", "shape")

    def __init__(self, first: int, values: list, shape: tuple):
        self.first, self.values, self.shape = first, values, shape

    def __reduce__(self) -> tuple:
        return Block, (self.first, self.values, self.shape)

    def pairs(self) -> list:
        """``(index, value)`` for each value that is not ``PENDING``."""
        keys = row_major(self.shape, self.first, self.first + len(self.values))
        return [(key, v) for key, v in zip(keys, self.values) if v is not PENDING]


class _Pending:
    def __reduce__(self) -> str:
        return "PENDING"

    def __repr__(self) -> str:
        return "<pending>"


#: a Block's placeholder for a value that comes as a pair of its own
PENDING = _Pending()


def in_order(items: list) -> tuple[list, bool]:
    """The values of an ordered reduction (``(key, value)`` pairs and :class:`Block` objects)
    by key; and whether it came as Blocks only (plain values: no element raised)."""
    if all(type(x) is Block for x in items):
        out: list = []
        for block in sorted(items, key=operator.attrgetter("first")):
            out.extend(block.values)
        return out, True
    pairs: list = []
    for x in items:
        if type(x) is Block:
            pairs.extend(x.pairs())
        else:
            pairs.append(x)
    pairs.sort(key=operator.itemgetter(0))
    return [v for _, v in pairs], False


def order_key(el: "Chare", section: Any) -> Any:
    """Where ``el``'s value goes in an ordered reduction: by index; in a union of several
    collections, by the element's collection first (in the union's order), then by index."""
    if section is None or not section.others:
        return el.index
    coll = el.collection._info.id
    return (next(i for i, (info, _) in enumerate(section.parts) if info.id == coll), el.index)
