"""The contract between the Python runtime and its compiled core (``shoal/_native``), and
the wiring of one into the other.

The compiled core sends entry-method calls from element proxies and delivers the ones it
receives without entering Python; :mod:`shoal._runtime.runtime` and :mod:`shoal._runtime.proxy`
hold the Python code it shadows, which still handles every other case. Only the MPI
transport has a core (``SHOAL_NATIVE=0`` turns it off).

What the core may touch is declared here and in ``_native/contract.h``, field for field
in the same order: :data:`SLOTS`, the ``__slots__`` members of runtime classes it reads
or writes, and :data:`NAMES`, the attributes and methods it looks up on runtime objects.
No C file finds a slot or a name any other way (tests/native/test_core_contract.py). What it is
given besides (callbacks, tables) is in :func:`make_core`; what it calls back is the
functions below.
"""

from __future__ import annotations

import pickle
from time import perf_counter

TYPE_CHECKING = False  # typing is for type checkers: a PE's start-up skips its import
if TYPE_CHECKING:
    from typing import Any

from . import chare, context, message
from .channels import Channel
from .chare import Chare
from .collections import CollectionInfo, CollectionState
from .futures import _DONE, _PENDING, Future, Task, future_handle
from .location import Locations
from .proxy import CALL_OPTIONS, CollectionProxy, ElementProxy, EntryRef, SectionProxy, _BoundEntry, use_native_entries
from .receive_sets import ReceiveSet
from .reducers import reducers
from .partials import PENDING, Block
from .reductions import EXCHANGE_REDUCERS, _check_target, _ResultFuture
from .tree import Tree

if TYPE_CHECKING:
    from .runtime import Runtime

__all__ = ["attach_core", "make_core", "slow_call", "TickClock", "EXCHANGE_REDUCERS", "SLOTS", "NAMES"]

#: contract.h's Slots, in order: (its field, the class, the slot)
SLOTS: tuple[tuple[str, type, str], ...] = (
    ("proxy_info", ElementProxy, "_info"), ("proxy_index", ElementProxy, "_index"),
    ("proxy_dest", ElementProxy, "_dest"), ("proxy_epoch", ElementProxy, "_epoch"),
    ("section_direct", SectionProxy, "_direct"), ("section_direct_epoch", SectionProxy, "_direct_epoch"),
    ("locations_epoch", Locations, "epoch"),
    ("info_id", CollectionInfo, "id"), ("info_root", CollectionInfo, "root"), ("info_shape", CollectionInfo, "shape"),
    ("info_kind", CollectionInfo, "kind"),
    ("state_info", CollectionState, "info"), ("state_elements", CollectionState, "elements"),
    ("state_done", CollectionState, "done"), ("state_count", CollectionState, "count"),
    ("state_first", CollectionState, "first"), ("state_span", CollectionState, "span"),
    ("state_hosts", CollectionState, "hosts"),
    ("tree_parent", Tree, "parent"), ("tree_children", Tree, "children"),
    ("channel_waiting", Channel, "waiting"), ("channel_into", Channel, "into"), ("channel_arrived", Channel, "arrived"),
    ("channel_sent", Channel, "sent"), ("channel_tag", Channel, "tag"), ("channel_remote", Channel, "remote"),
    ("channel_inbox", Channel, "inbox"), ("channel_ahead", Channel, "ahead"), ("channel_landed", Channel, "landed"),
    ("channel_checked", Channel, "checked"), ("channel_peer", Channel, "peer"), ("channel_peer_epoch", Channel, "peer_epoch"),
    ("future_state", Future, "_state"), ("future_value", Future, "_value"), ("future_callbacks", Future, "_callbacks"),
    ("future_fid", Future, "fid"), ("future_rt", Future, "_rt"), ("future_owner", Future, "owner"),
    ("future_origin", Future, "_origin"),
    ("set_channels", ReceiveSet, "channels"), ("set_buffers", ReceiveSet, "buffers"),
    ("set_remaining", ReceiveSet, "remaining"), ("set_item", ReceiveSet, "item"),
    ("chare_load", Chare, "_shoal_load"), ("chare_held", Chare, "_shoal_held"), ("chare_collection", Chare, "collection"),
    ("chare_index", Chare, "index"), ("chare_seq", Chare, "_shoal_seq"),
    ("task_rt", Task, "rt"), ("task_coro", Task, "coro"), ("task_on_done", Task, "on_done"),
    ("task_waiting", Task, "waiting"), ("task_wake", Task, "wake"), ("task_wake_now", Task, "wake_now"),
    ("task_load", Task, "load"), ("task_element", Task, "element"),
    ("rt_current_element", context.RunningState, "current_element"), ("rt_suspended", context.RunningState, "suspended"),
)

#: contract.h's Names, in order: (its field, the attribute or method name looked up)
NAMES: tuple[tuple[str, str], ...] = (
    ("future_table", "future_table"), ("local", "local"), ("on_value", "_on_value"), ("send_future", "send_future"),
    ("replier", "_replier"), ("pe", "pe"), ("ready", "ready"),
    ("route", "route"),
    ("futures", "futures"), ("next_fid", "next_fid"),
    ("funcs", "_shoal_funcs"), ("channels", "_shoal_channels"),
    ("append", "append"), ("popleft", "popleft"),
    ("index", "index"), ("ret_adopt", "ret_adopt"), ("ret_gathered", "ret_gathered"), ("ret_unsendable", "ret_unsendable"),
    ("holds_replies", "holds_replies"),
    ("waiters", "waiters"), ("remote_waiters", "remote_waiters"), ("shoal_away", "_shoal_away"),
    ("combine", "combine"), ("finish", "finish"), ("wake", "_wake"), ("resolve", "_resolve"),
    ("current", "_current"),
    ("call_slow", "_call_slow"),
    ("resume_now", "_resume_now"),
    ("add_done_callback", "add_done_callback"), ("refuse", "_refuse"), ("result", "result"),
    ("holds", "holds"), ("add_own", "add_own"), ("disagree", "contributions_disagree"),
    ("twice", "contributed_twice"), ("send", "send"),
    ("reduce", "__reduce__"), ("module", "__module__"), ("qualname", "__qualname__"),
)



class TickClock:
    """The compiled paths' clock (``Core.ticks()``: the time-stamp counter) in seconds,
    calibrated against ``perf_counter`` from a first reading; the ratio is measured
    again when a second has passed, so it gets more exact as the job goes on."""

    def __init__(self, core: Any):
        self.core = core
        #: the first reading, taken now: by the first question (a balancing round's report,
        #: a trace's export) it is normally more than 10 ms old, so nobody waits for it
        self.origin: tuple[int, float] = self._reading()
        self.scale = 0.0
        self.measured = 0.0  # perf_counter when `scale` was measured

    def seconds_per_tick(self) -> float:
        now = perf_counter()
        if not self.scale:
            while perf_counter() - self.origin[1] < 0.01:  # the first ratio spans 10 ms at least
                pass
        elif now - self.measured < 1.0:
            return self.scale
        ticks, now = self._reading()
        self.scale = (now - self.origin[1]) / max(ticks - self.origin[0], 1)
        self.measured = now
        return self.scale

    def _reading(self) -> tuple[int, float]:
        """``(ticks, perf_counter())`` read together: of 5 tries, the one with the fewest
        ticks around the clock's read (a process descheduled between two reads would
        shift every time converted by how long it waited; a trace's message arrows and
        bytes in flight compare two PEs' times)."""
        ticks = self.core.ticks
        best = (1 << 64, 0, 0.0)
        for _ in range(5):
            a = ticks()
            now = perf_counter()
            b = ticks()
            if b - a < best[0]:
                best = (b - a, (a + b) // 2, now)
        return best[1], best[2]

    def seconds(self, ticks: int) -> float:
        """``ticks`` as a time of ``perf_counter``."""
        scale = self.seconds_per_tick()
        return self.origin[1] + (ticks - self.origin[0]) * scale


def slow_call(proxy: ElementProxy, entry: int, name: str, args: tuple, kwargs: dict) -> Any:
    """An entry-method call the compiled path did not take (``ret=True``, keywords to a
    local element, an unusual index): the Python path of :class:`_BoundElementEntry`."""
    own = getattr(type(proxy), "_call_slow", None)  # a proxy class with call options of its own
    if own is not None:
        return own(proxy, entry, name, args, kwargs)
    ret = kwargs.pop("ret", False) if kwargs else False
    rt = context._current or context.current("calling an entry method")
    return rt.invoke(proxy, entry, name, args, kwargs, ret)


def slow_broadcast(proxy: CollectionProxy, entry: int, name: str, args: tuple, kwargs: dict) -> Any:
    """A broadcast the compiled path did not take (arguments it does not encode, keywords
    other than ``ret``): the Python path of :class:`_BoundCollectionEntry`."""
    ret = kwargs.pop("ret", False) if kwargs else False
    rt = context._current or context.current("broadcasting an entry method")
    return rt.broadcast(proxy._info, entry, name, args, kwargs, ret, 4)


def slow_multicast(proxy: SectionProxy, entry: int, name: str, args: tuple, kwargs: dict) -> Any:
    """A multicast the compiled section entry did not take (``ret=True``, keywords, members
    on this PE or many on one PE, large arrays): the Python path of the section's entry."""
    ret = kwargs.pop("ret", False) if kwargs else False
    return proxy._invoke(entry, name, args, kwargs, ret)


def section_direct(proxy: SectionProxy) -> tuple | None:
    """The members' element proxies if a multicast to section ``proxy`` may go as one call
    each, kept on it for the location epoch (``Sections.direct``); else None."""
    rt = context._current or context.current("multicasting an entry method")
    return rt.sections.direct(proxy)


def outcomes_call(proxy: Any, entry: int, name: str, args: tuple, kwargs: dict) -> Any:
    """``method.outcomes(*args, **kwargs)`` of a compiled bound entry method."""
    return _BoundEntry(proxy, entry, name).outcomes(*args, **kwargs)


def attach_core(transport: Any, rt: "Runtime") -> Any:
    """The compiled core of ``rt``, attached to ``transport``'s compiled frames (their
    hook then hands it received frames first); None if the transport has none."""
    compiled = transport.compiled()
    return None if compiled is None else make_core(compiled[0], compiled[1], transport, rt)


def make_core(module: Any, frames: Any, transport: Any, rt: "Runtime") -> Any:
    """A ``Core`` of ``module`` serving ``rt`` over ``frames``; element proxies made from
    now on use the compiled entry methods.

    The core reads and writes the slots :data:`SLOTS` declares, looks up the names of
    :data:`NAMES`, and takes the future states from :mod:`.futures` rather than keeping its
    own numbers."""
    module.configure_contract(tuple((cls, slot) for _, cls, slot in SLOTS), tuple(name for _, name in NAMES))
    core = module.Core(
        frames, rt, rt.locations, rt.colls, rt._start_task, rt._entry_failed,
        message.encode, pickle.loads, message._layouts, message._layout, transport.send_after_eager,
        Future, ReceiveSet, _PENDING, _DONE,
    )
    if rt.new_load is not None:
        rt.new_load = module.Load
    module.configure_proxies(vars(context), slow_call, slow_broadcast, slow_multicast, section_direct, outcomes_call, EntryRef,
                             tuple(CALL_OPTIONS))
    module.configure_tasks(Future, _PENDING, _DONE, vars(context))
    core.use_exchanges(
        rt.reductions, rt.npes, rt.post_value, _ResultFuture, Chare, vars(context),
        tuple(getattr(reducers, name) for name in EXCHANGE_REDUCERS),
    )
    core.use_broadcasts(rt.reductions, rt.tree_from, rt.balancer.holding, Block, PENDING, rt.reductions.partials)
    core.use_contributions(rt.reductions, _check_target, EntryRef, vars(context), Chare, future_handle,
                           rt.reductions.pack_entry, rt.reductions.unpack_entry)
    rt.reductions.use_core(core)
    # across nodes an all-reduce goes up and down the node-aware tree, not the butterfly
    chare.compiled_allreduce = core.allreduce if rt.nodes is None else None
    Chare.contribute = module.contribute_method(Chare, chare.PYTHON_CONTRIBUTE)  # type: ignore[method-assign]
    message.pickle_simple = module.pickle_simple
    use_native_entries(module.EntryDescriptor, module.BoundEntry)
    return core
