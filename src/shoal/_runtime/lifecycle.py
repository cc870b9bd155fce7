"""How collections come to exist: creation, construction of elements, sparse insertion.

A collection is created by a CREATE message that travels down the tree of all PEs
rooted at its creator; each PE builds its local elements and then replays messages
that arrived early. Sparse arrays grow by INSERT messages to each element's home
and become complete when the insertion count balances after ``done_inserting()``.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing is for type checkers: a PE's start-up skips its import
if TYPE_CHECKING:
    from typing import Any

from ..errors import ShoalError
from . import tree
from .chare import Chare, entry_table
from .collections import CollectionInfo, CollectionState
from .memory import CreationWatch, check_fits
from .message import Kind, decode, encode, encode_shared, pack_header, unpicklable
from .context import current
from .proxy import CollectionProxy, proxy_classes

if TYPE_CHECKING:
    from .runtime import Runtime

__all__ = ["Lifecycle", "destroy"]


class Lifecycle:
    """One PE's part in creating collections and their elements."""

    def __init__(self, rt: "Runtime"):
        self.rt = rt
        self.pending_finish: dict[int, tuple[list, int]] = {}  # sparse arrays completed before CREATE arrived here
        self.insert_counts: dict[int, list[int]] = {}  # collection -> [inserts sent, inserts done] here
        self.closed: set[int] = set()  # sparse arrays this PE called done_inserting() on
        self.watch = CreationWatch()  # the node's memory, as this PE makes elements

    def create(self, cls: type, kind: str, shape: tuple | None, ndims: int, placement: Any, args: tuple,
               pes: tuple | None = None) -> "CollectionProxy":
        rt = self.rt
        if not (isinstance(cls, type) and issubclass(cls, Chare)):
            raise TypeError(f"{cls!r} is not a subclass of shoal.Chare")
        if kind == "group" and rt.npes == 0:
            raise ShoalError("no PEs")
        entry_table(cls)
        if kind == "dense" and shape is not None:
            check_fits(cls.__qualname__, shape, rt.npes, _pes_on_my_node(rt))
        info = CollectionInfo(rt.new_id(), cls, kind, shape, ndims, placement, rt.pe, pes)
        rt.infos[info.id] = info
        try:
            encode(placement)
        except Exception as exc:
            raise TypeError(
                f"the placement {placement!r} of {cls.__qualname__} cannot be sent to other PEs ({exc}); "
                "define it as a module-level function or make it picklable"
            ) from None
        try:
            segments = encode_shared((info, args))  # every PE decodes a creation
        except Exception as exc:
            raise unpicklable(cls, "__init__", args, {}, exc) from None
        rt.send_raw(rt.pe, pack_header(Kind.CREATE, 0, rt.pe, 0, info.id), segments, info.id)
        proxy = proxy_classes(cls)[1](info)
        if rt.creation_observer is not None:
            rt.creation_observer(info)
        return proxy

    def destroy(self, info: CollectionInfo) -> None:
        """Remove collection ``info`` on every PE (a broadcast of the system group)."""
        from .system import SYSTEM_ID

        if info.id == SYSTEM_ID:
            raise ShoalError("the runtime's own system group cannot be destroyed")
        self.rt.system.destroy_collection(info.id, info.root)

    def destroy_here(self, coll: int, root: int) -> None:
        """This PE's part of :meth:`destroy`: drop the elements and every record of the
        collection; later messages to it are dropped (those that wait for a value fail)."""
        rt = self.rt
        rt.destroyed[coll] = root
        cs = rt.colls.pop(coll, None)
        rt.infos.pop(coll, None)
        for header, _ in rt.unknown.pop(coll, ()):
            rt.to_destroyed(header)
        if cs is not None:
            for early in cs.early.values():
                for header, _ in early:
                    rt.to_destroyed(header)
            cs.elements.clear()
        self.pending_finish.pop(coll, None)
        self.insert_counts.pop(coll, None)
        self.closed.discard(coll)
        rt.locations.forget(coll)
        rt.reductions.forget_collection(coll)

    def insert(self, info: CollectionInfo, index: tuple, args: tuple) -> None:
        rt = self.rt
        if info.kind != "sparse":
            raise ShoalError(f"insert() is for sparse arrays; this {info.kind} of {info.cls.__qualname__} is fixed")
        cs = rt.colls.get(info.id)
        if info.id in self.closed or (cs is not None and cs.done):
            raise ShoalError(
                f"insert({index if len(index) > 1 else index[0]}) into the sparse array of {info.cls.__qualname__} "
                "after done_inserting(); insert every element first"
            )
        counts = self.insert_counts.setdefault(info.id, [0, 0])
        counts[0] += 1
        rt.post(rt.locate(info, index), Kind.INSERT, 0, 0, info.id, index, (info, args))

    def done_inserting(self, info: CollectionInfo) -> None:
        rt = self.rt
        if info.kind != "sparse":
            raise ShoalError(f"done_inserting() is for sparse arrays, not a {info.kind} of {info.cls.__qualname__}")
        if info.id in self.closed:
            raise ShoalError(f"done_inserting() was already called on the sparse array of {info.cls.__qualname__}")
        self.closed.add(info.id)
        rt.system.count_inserts(info.id)

    def finish_inserting(self, coll: int, hosts: list, size: int) -> None:
        rt = self.rt
        cs = rt.colls.get(coll)
        if cs is None:
            self.pending_finish[coll] = (hosts, size)
            return
        cs.size = size
        cs.hosts = hosts
        cs.count = len(cs.elements)
        cs.span = tree.over(hosts, rt.pe, rt.fanout, rt.nodes)
        cs.done = True
        deferred, cs.deferred = cs.deferred, []
        for fn in deferred:
            rt.uncaused(fn)  # broadcasts held until the array was complete
        rt.reductions.resume_collection(coll)
        for index, msgs in cs.early.items():
            rt.fail(
                ShoalError(
                    f"{len(msgs)} message(s) were sent to element {index} of the sparse array of "
                    f"{cs.info.cls.__qualname__}, which was never inserted"
                ),
                f"sparse array {cs.info.cls.__qualname__}",
            )

    def construct(self, cs: CollectionState, index: tuple, args: tuple) -> None:
        """Make element ``index`` here: its runtime slots, then ``__init__(*args)``, then the
        messages that came for it before it existed."""
        self.construct_all(cs, (index,), args)

    def construct_all(self, cs: CollectionState, indices: Any, args: tuple) -> None:
        """:meth:`construct` for each of ``indices`` (the loop of a collection's creation:
        a million elements take a second or less)."""
        rt = self.rt
        info = cs.info
        cls: Any = info.cls
        new, init, load = cls.__new__, cls.__init__, rt.new_load
        elements, early, counts = cs.elements, cs.early, rt.counts
        collection = cs.proxy
        group = info.kind == "group"
        watch = self.watch
        for index in indices:
            el = new(cls)
            el._shoal_load = load() if load is not None else None
            el._shoal_held = None
            el._shoal_seq = 0
            el.index = index[0] if group else index
            el.collection = collection
            elements[index] = el
            counts.depth += 1
            try:
                init(el, *args)
            except BaseException as exc:  # noqa: BLE001
                counts.depth -= 1
                rt.fail(exc, f"{cls.__qualname__}.__init__ of element {el.index!r}")
                return
            counts.depth -= 1
            watch.made += 1
            if watch.made == watch.next and (short := watch.short(cls.__qualname__)):
                rt.fail(MemoryError(short), f"creating {cls.__qualname__}")
                return
            if early:
                for header, segments in early.pop(index, ()):
                    rt.dispatch(header, segments)

    def on_create(self, kind: int, entry: int, src: int, aux: int, coll: int, index: tuple, segments: list, header: bytes) -> None:
        rt = self.rt
        info, args = decode(segments)
        for child in rt.tree_from(info.root).children:
            rt.send_raw(child, header, segments, coll)
        if coll in rt.destroyed:  # destroyed before it was made here
            return
        cs = rt.colls[coll] = CollectionState(info, proxy_classes(info.cls)[1](info))
        if info.kind == "group":
            cs.size = rt.npes if info.pes is None else len(info.pes)
        if info.kind == "sparse":
            pending = self.pending_finish.pop(coll, None)
            if pending is not None:
                self.finish_inserting(coll, *pending)
        else:
            cs.hosts = info.hosts(rt.npes)
            cs.span = tree.over(cs.hosts, rt.pe, rt.fanout, rt.nodes)
            local = ([(rt.pe,)] if info.kind == "group" else list(info.local_indices(rt.pe, rt.npes))) if cs.span else []
            cs.count = len(local)
            if info.kind == "dense" and info.placement is None:
                cs.first = info.block(rt.pe, rt.npes)[0]
            self.construct_all(cs, local, args)
        for h, s in rt.unknown.pop(coll, ()):
            rt.dispatch(h, s)
        rt.reductions.resume_collection(coll)

    def on_insert(self, kind: int, entry: int, src: int, aux: int, coll: int, index: tuple, segments: list, header: bytes) -> None:
        rt = self.rt
        cs = rt.collection_or_defer(coll, header, segments)
        if cs is None:
            return
        self.insert_counts.setdefault(coll, [0, 0])[1] += 1
        if cs.done:
            rt.fail(ShoalError(f"insert({index}) into the sparse array of {cs.info.cls.__qualname__} after done_inserting()"), "Array.insert")
            return
        if index in cs.elements:
            rt.fail(ShoalError(f"element {index} of the sparse array of {cs.info.cls.__qualname__} was inserted twice"), "Array.insert")
            return
        _, args = decode(segments)
        self.construct(cs, index, args)


def _pes_on_my_node(rt: "Runtime") -> int:
    """How many PEs share this PE's node (all of them in one process, or on one node)."""
    nodes = rt.nodes
    if nodes is None:
        return rt.npes
    mine = nodes[rt.pe]
    return sum(1 for n in nodes if n == mine)


def destroy(collection: Any) -> None:
    """Delete a Group or Array on every PE; returns at once.

    Its elements are dropped on every PE (no entry method runs on them again) and so is
    every record of it. Messages still on their way to it are dropped when they arrive,
    except that a call waiting for a value (``ret=True``, a future) gets a
    :class:`~shoal.ShoalError` instead. Destroying a collection twice does nothing more.
    """
    if not isinstance(collection, CollectionProxy):
        raise TypeError(f"shoal.destroy() takes a Group or an Array (its collection proxy), not {collection!r}")
    current("shoal.destroy()").lifecycle.destroy(collection._info)
