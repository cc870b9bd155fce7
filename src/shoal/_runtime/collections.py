"""Groups and arrays of chares: what a collection is, where its elements live.

:class:`CollectionInfo` is the immutable description that travels inside proxies, so
any PE can route a message without asking anyone. :class:`CollectionState` is one
PE's part of a collection: its local elements and its place in the reduction tree.
Which PE an element lives on is decided by the location manager, starting from the
home that the placement gives; nothing here assumes an element never moves.
"""

from __future__ import annotations

import itertools
import math

TYPE_CHECKING = False  # typing is for type checkers: a PE's start-up skips its import
if TYPE_CHECKING:
    from typing import Any, Callable, Iterator, Sequence, TypeAlias

from ..numpy_types import integer
from . import tree
from .context import current

if TYPE_CHECKING:
    from .chare import Chare
    from .proxy import CollectionProxy

__all__ = ["Group", "Array", "CollectionInfo", "CollectionState", "block_placement", "order_blocks", "row_major"]

#: ``placement(index, npes) -> pe``: the PE an element of a collection starts on
Placement: TypeAlias = "Callable[[tuple, int], int]"


def row_major(shape: tuple, lo: int = 0, hi: int | None = None) -> Iterator[tuple]:
    """The indices of a dense array of ``shape`` numbered ``lo`` to ``hi - 1`` in row-major
    order, as tuples of ints (``np.unravel_index(np.arange(lo, hi), shape)``, as fast
    without NumPy: a program whose arrays of chares are not NumPy's starts without it)."""
    if hi is None:
        hi = math.prod(shape)
    if len(shape) == 1:
        yield from zip(range(lo, hi))
        return
    inner = math.prod(shape[1:])
    head, offset = divmod(lo, inner)
    while head * inner < hi:
        stop = min(hi - head * inner, inner)
        rests = itertools.product(*map(range, shape[1:])) if offset == 0 and stop == inner \
            else row_major(shape[1:], offset, stop)
        for rest in rests:
            yield (head, *rest)
        head, offset = head + 1, 0


#: The PE that holds each block of the default placement, node by node, where the launcher
#: dealt ranks to nodes out of order (round-robin, say), so that neighbouring blocks share a
#: node; None: block b on PE b. One MPI process runs one PE, so this is the process's; the
#: in-process transport has one node.
_block_pes: list[int] | None = None
_block_of: dict[int, int] = {}  # the inverse: PE -> its block


def order_blocks(nodes: Sequence[int] | None) -> None:
    """Give the default placement's blocks to PEs node by node (``nodes``: the node of each
    PE, or None for one node)."""
    global _block_pes, _block_of
    order = None if nodes is None else sorted(range(len(nodes)), key=lambda pe: (nodes[pe], pe))
    if order is not None and order == list(range(len(order))):
        order = None  # ranks already numbered node by node (block distribution): PE order
    _block_pes, _block_of = order, ({pe: b for b, pe in enumerate(order)} if order is not None else {})


def block_placement(index: tuple, shape: tuple, npes: int) -> int:
    """Contiguous blocks of the row-major order of ``shape`` per PE (node by node: see
    :func:`order_blocks`)."""
    lin = 0
    for i, n in zip(index, shape):
        lin = lin * n + i
    size = 1
    for n in shape:
        size *= n
    block = lin * npes // size
    return block if _block_pes is None else _block_pes[block]


class CollectionInfo:
    """What every PE needs to know to address a collection's elements."""

    __slots__ = ("id", "cls", "kind", "shape", "ndims", "placement", "root", "size", "pes")

    def __init__(self, id: int, cls: type, kind: str, shape: tuple | None, ndims: int, placement: Placement | None,
                 root: int, pes: tuple | None = None):
        self.id = id
        self.cls = cls
        self.kind = kind  # "group", "dense" or "sparse"
        self.shape = shape
        self.ndims = ndims
        self.placement = placement
        self.root = root
        self.size = int(math.prod(shape)) if shape is not None else len(pes) if pes is not None else 0
        self.pes = pes  # a group's PEs when it spans only some (sorted), else None

    def __reduce__(self) -> tuple:
        return (_intern_info, (self.id, self.cls, self.kind, self.shape, self.ndims, self.placement, self.root, self.pes))

    def normalize(self, index: Any) -> tuple:
        """``index`` as the internal tuple; an error at the call site if it is out of range."""
        if type(index) is int and self.ndims == 1 and self.kind != "group":  # a[i], the common case
            shape = self.shape
            if shape is None or 0 <= index < shape[0]:
                return (index,)
        idx = index if type(index) is tuple else (index,)
        if self.kind == "group":
            if len(idx) != 1 or not isinstance(idx[0], (int, integer())):
                raise IndexError(f"a Group of {self.cls.__qualname__} is indexed by a PE number, not {index!r}")
            pe, npes = int(idx[0]), current("indexing a Group").npes
            if not 0 <= pe < npes:
                raise IndexError(f"PE {pe} is outside the Group of {self.cls.__qualname__} (PEs 0..{npes - 1})")
            if self.pes is not None and pe not in self.pes:
                raise IndexError(f"the Group of {self.cls.__qualname__} has no element on PE {pe}: it spans "
                                 f"PEs {list(self.pes)}")
            return (pe,)
        ints = (int, integer())
        if len(idx) != self.ndims or not all(isinstance(i, ints) for i in idx):
            raise IndexError(
                f"{index!r} is not an index of the {self.ndims}-d array of {self.cls.__qualname__}; "
                f"use {self.ndims} integer(s)"
            )
        idx = tuple(int(i) for i in idx)
        if self.shape is not None:
            for i, n in zip(idx, self.shape):
                if not 0 <= i < n:
                    raise IndexError(
                        f"index {idx if len(idx) > 1 else idx[0]} is outside the dense array of "
                        f"{self.cls.__qualname__} with shape {self.shape}"
                    )
        return idx

    def home(self, index: tuple, npes: int) -> int:
        """The PE that creates element ``index`` and knows where it is."""
        if self.kind == "group":
            return index[0]
        if self.placement is not None:
            pe = self.placement(index if len(index) > 1 else index[0], npes)
            if not isinstance(pe, (int, integer())) or not 0 <= pe < npes:
                raise ValueError(
                    f"placement {self.placement!r} put element {index} of {self.cls.__qualname__} "
                    f"on PE {pe!r}; it must return an int in 0..{npes - 1}"
                )
            return int(pe)
        if self.shape is not None:
            return block_placement(index, self.shape, npes)
        return hash(index) % npes

    def local_indices(self, pe: int, npes: int) -> Iterator[tuple]:
        """The indices of a dense array whose home is ``pe``, in row-major order."""
        assert self.shape is not None
        if self.placement is None:
            return row_major(self.shape, *self.block(pe, npes))
        return (i for i in row_major(self.shape) if self.home(i, npes) == pe)

    def block(self, pe: int, npes: int) -> tuple[int, int]:
        """The row-major numbers ``[lo, hi)`` of the elements of a dense array with the
        default placement whose home is ``pe``."""
        n, b = self.size, pe if _block_pes is None else _block_of[pe]
        return -(-b * n // npes), -(-(b + 1) * n // npes)

    def hosts(self, npes: int) -> Sequence[int]:
        """The sorted PEs that are home to at least one element (dense arrays and groups)."""
        if self.kind == "group":
            return range(npes) if self.pes is None else self.pes
        assert self.shape is not None
        if self.placement is None:
            n = self.size
            if n >= npes:
                return range(npes)
            blocks = {lin * npes // n for lin in range(n)}
            return sorted(blocks if _block_pes is None else {_block_pes[b] for b in blocks})
        return sorted({self.home(i, npes) for i in row_major(self.shape)})


def _intern_info(id: int, cls: type, kind: str, shape: tuple | None, ndims: int, placement: Any, root: int,
                 pes: tuple | None = None) -> CollectionInfo:
    rt = current("unpickling a proxy")
    info = rt.infos.get(id)
    if info is None:
        info = rt.infos[id] = CollectionInfo(id, cls, kind, shape, ndims, placement, root, pes)
    return info


class CollectionState:
    """One PE's part of a collection."""

    __slots__ = ("info", "elements", "count", "span", "hosts", "done", "early", "deferred", "size", "first", "proxy")

    def __init__(self, info: CollectionInfo, proxy: "CollectionProxy"):
        self.info = info
        #: the collection's proxy, shared as ``collection`` by the elements on this PE
        self.proxy = proxy
        self.elements: dict[tuple, "Chare"] = {}
        self.count = 0  # elements that contribute to reductions here (set before they are built)
        self.span: tree.Tree | None = None  # this PE's links in the reduction tree
        self.hosts: Sequence[int] = ()
        self.done = info.kind != "sparse"  # a sparse array is complete after done_inserting
        self.early: dict[tuple, list] = {}  # messages to elements not inserted yet
        self.deferred: list = []  # broadcasts and contributions waiting for `done`
        self.size = info.size  # elements in the whole collection (a sparse array's: once complete)
        #: the row-major number of the first element of ``elements`` while they are this
        #: PE's block of a dense array in order (as created, none moved in or out), else -1
        self.first = -1


def Group(cls: type, args: Sequence[Any] = (), pes: Sequence[int] | None = None) -> "CollectionProxy":
    """Create one element of ``cls`` (a :class:`~shoal.Chare` subclass) on every PE, or
    on each PE of ``pes``; returns the collection proxy at once.

    Each element is made with ``cls(*args)`` (default: no arguments); its ``index`` is
    its PE number, so ``group[pe]`` is the element on PE ``pe``. A Group over ``pes``
    has elements on those PEs only: its broadcasts run there, its reductions combine
    those elements, and ``group[pe]`` of another PE is an IndexError.
    """
    rt = current("shoal.Group()")
    members = None
    if pes is not None:
        members = tuple(sorted({int(p) for p in pes}))
        if not members or not all(0 <= p < rt.npes for p in members):
            raise ValueError(f"shoal.Group(pes={list(pes)!r}): give one or more PEs in 0..{rt.npes - 1}")
        if len(members) == rt.npes:
            members = None  # every PE: a plain Group
    return rt.lifecycle.create(cls, "group", None, 1, None, tuple(args), pes=members)


def Array(
    cls: type,
    dims: int | Sequence[int] | None = None,
    args: Sequence[Any] = (),
    placement: Placement | None = None,
    ndims: int | None = None,
) -> "CollectionProxy":
    """Create an N-d array of ``cls`` elements; returns the collection proxy at once.

    * ``cls``: a :class:`~shoal.Chare` subclass; each element is made with
      ``cls(*args)``.
    * ``dims``: an int (a 1-d array of that many elements) or a tuple of 1 to 8 sizes.
      ``Array(C, (4, 8))`` is dense; element indices are tuples (``arr[2, 5]``,
      ``self.index == (2, 5)``).
    * ``args`` (default ``()``): the constructor's arguments, the same for every element.
    * ``placement`` (default None: contiguous blocks of the row-major order per PE): a
      function ``placement(index, num_pes) -> pe`` that picks each element's PE.
    * ``ndims``: without ``dims``, a sparse array of that many dimensions:
      ``Array(C, ndims=2)``, then ``insert(index, args)`` for each element and
      ``done_inserting()``.
    """
    rt = current("shoal.Array()")
    if dims is None:
        if ndims is None or ndims < 1:
            raise ValueError("shoal.Array needs dims (a dense array) or ndims >= 1 (a sparse array)")
        return rt.lifecycle.create(cls, "sparse", None, int(ndims), placement, tuple(args))
    shape: tuple[Any, ...]
    try:  # one size, or a sequence of them (a float, or anything else, is refused below)
        shape = (dims,) if isinstance(dims, (int, integer())) else tuple(dims)
    except TypeError:
        shape = (dims,)
    if not shape or len(shape) > 8 or not all(_size(n) for n in shape):
        raise ValueError(f"shoal.Array dims must be 1 to 8 positive integers, not {dims!r}")
    if ndims is not None and ndims != len(shape):
        raise ValueError(f"shoal.Array got dims {shape} and ndims={ndims}; give one or make them agree")
    shape = tuple(int(n) for n in shape)
    return rt.lifecycle.create(cls, "dense", shape, len(shape), placement, tuple(args))


def _size(n: Any) -> bool:
    """Whether ``n`` is one size of a dense array: a positive integer (not a bool, nor a float)."""
    return isinstance(n, (int, integer())) and not isinstance(n, bool) and bool(n > 0)

