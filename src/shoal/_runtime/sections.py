"""Sections: a subset of a collection (or a union over several), for multicast and
section-local reductions.

A section proxy carries its member indices, per collection. Multicast sends one
message to each PE that holds members of a collection; reductions over a section run
up a tree over those members' home PEs only, which each PE derives from the member
lists (cached by section id). A reduction over a union is one reduction: its domain is
the section, named by its first collection and its id, whichever collection a
contributor is in.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing is for type checkers: a PE's start-up skips its import

from ..numpy_types import ndarray
from . import tree
from .chare import entry_table
from .futures import Future, future_handle
from .message import FWD, Kind, bad_ret, decode, encode, pack_header, unpicklable
from .proxy import _element

if TYPE_CHECKING:
    from .collections import CollectionInfo
    from .proxy import SectionProxy
    from .runtime import Runtime

__all__ = ["Sections", "SectionState"]

#: a PE with at most this many members of a multicast without ret=True gets one compiled
#: call each (cheaper than one pickled multicast up to here), if the arguments are small
_CALLS_MAX = 4
_SMALL = 65536  # bytes of array arguments above which one multicast beats a copy per member
_PLANS_MAX = 4096  # multicast plans kept (see Sections._plan)


def _small(args: tuple) -> bool:
    """Whether ``args`` are cheap to send once per member: no array of more than _SMALL bytes."""
    array = ndarray()
    for a in args:  # (a loop, not all() of a generator: this runs once per multicast)
        if type(a) is array and a.nbytes > _SMALL:
            return False
    return True


class SectionState:
    """One PE's view of a section: its members (``(collection id, index)`` pairs), its
    tree links, its local member count."""

    __slots__ = ("members", "span", "local")

    def __init__(self, members: frozenset, span: tree.Tree | None, local: int):
        self.members = members
        self.span = span
        self.local = local


class Sections:
    """Section multicasts and the per-PE section cache."""

    def __init__(self, rt: "Runtime"):
        self.rt = rt
        self.states: dict[int, SectionState] = {}
        #: (section id, part) -> (location epoch, [(PE, members, their proxies or None)]):
        #: where a multicast goes, kept while no element's location changes
        self.plans: dict[tuple[int, int], tuple[int, list]] = {}

    def multicast(self, section: "SectionProxy", entry: int, name: str, args: tuple, kwargs: dict, ret: bool) -> Future | None:
        """Send entry method ``entry`` to the elements of ``section``, one message per PE
        (per collection of a union: there the method of the same name); a PE with few
        members gets a compiled call each instead (:meth:`_calls`)."""
        if ret is False and not kwargs and self.rt._core_send is not None:
            proxies = self.direct(section)
            if proxies is not None and _small(args):
                send = self.rt._core_send
                for i, proxy in enumerate(proxies):
                    if not send(proxy, entry, 0, *args):
                        break
                else:
                    return None
                if i > 0:  # (the arguments decide, so the first declines if any does) the rest as plain calls
                    for proxy in proxies[i:]:
                        self.rt.invoke(proxy, entry, name, args, {}, False)
                    return None
        if ret is not False and ret is not True:
            raise bad_ret(section._info.cls, name, ret)
        fut = Future(_depth=5) if ret else None
        calls = fut is None and not kwargs and self.rt._core_send is not None and _small(args)
        for part, (info, section_members) in enumerate(section.parts):
            e = entry if info.cls is section._info.cls else entry_table(info.cls).id_of(name)
            for pe, members, proxies in self._plan(section.sid, part, info, section_members):
                if calls and proxies is not None:
                    members = self._calls(members, proxies, e, args)  # those the compiled path did not take
                    if not members:
                        continue
                payload = (section if ret else None, members, args, kwargs)
                try:
                    segments = encode(payload)
                except Exception as exc:
                    raise unpicklable(info.cls, name, args, kwargs, exc) from None
                header = pack_header(Kind.MULTICAST, e, self.rt.pe, fut.fid if fut else 0, info.id)
                self.rt.send_raw(pe, header, segments, info.id)
        return fut

    def _plan(self, sid: int, part: int, info: "CollectionInfo", section_members: tuple) -> list:
        """Where the members of one part of section ``sid`` are: (PE, members, their element
        proxies where at most _CALLS_MAX are on that PE, else None), made again whenever a
        location changed since."""
        epoch = self.rt.locations.epoch
        plan = self.plans.get((sid, part))
        if plan is not None and plan[0] == epoch:
            return plan[1]
        by_pe: dict[int, list] = {}
        for m in section_members:
            by_pe.setdefault(self.rt.locate(info, m), []).append(m)
        where = [(pe, members, [_element(info, m) for m in members] if len(members) <= _CALLS_MAX else None)
                 for pe, members in by_pe.items()]
        if len(self.plans) >= _PLANS_MAX:  # sections made and dropped by the thousand: start again
            self.plans.clear()
        self.plans[(sid, part)] = (epoch, where)
        return where

    def direct(self, section: "SectionProxy") -> tuple | None:
        """The element proxies of the members of ``section`` if a multicast to it may go as
        one compiled call each: one collection, every member on another PE, at most
        _CALLS_MAX on each (:meth:`_plan`); else None. Kept on the section proxy for the
        location epoch (the compiled section entry reads them there)."""
        epoch = self.rt.locations.epoch
        if section._direct_epoch == epoch:
            return section._direct
        proxies = None
        if not section.others:
            where = self._plan(section.sid, 0, section._info, section.members)
            pe = self.rt.pe
            if all(ps is not None and dest != pe for dest, _, ps in where):
                proxies = tuple(p for _, _, ps in where for p in ps)
        section._direct, section._direct_epoch = proxies, epoch
        return proxies

    def _calls(self, members: list, proxies: list, entry: int, args: tuple) -> list:
        """Send ``members`` of a PE plain calls of ``entry`` through the compiled path, as
        ``proxy[m].method(*args)`` would: one small message each, no pickled payload, and
        the receiver's compiled path runs the method. Returns the members it did not take."""
        send = self.rt._core_send
        assert send is not None
        taken = [send(proxy, entry, 0, *args) for proxy in proxies]
        return members if not any(taken) else [m for m, done in zip(members, taken) if not done]

    def state(self, section: "SectionProxy") -> SectionState:
        st = self.states.get(section.sid)
        if st is None:
            npes = self.rt.npes  # home PEs: where elements contribute (reductions.py), wherever they are
            where = [info.home(m, npes) for info, members in section.parts for m in members]
            hosts = sorted(set(where))
            st = SectionState(
                frozenset((info.id, m) for info, members in section.parts for m in members),
                tree.over(hosts, self.rt.pe, self.rt.fanout, self.rt.nodes), where.count(self.rt.pe)
            )
            self.states[section.sid] = st
        return st

    def members(self, section: "SectionProxy") -> frozenset:
        return self.state(section).members

    def on_multicast(self, kind: int, entry: int, src: int, aux: int, coll: int, index: tuple, segments: list, header: bytes) -> None:
        cs = self.rt.collection_or_defer(coll, header, segments)
        if cs is None:
            return
        section, members, args, kwargs = decode(segments)
        target = future_handle(src, aux) if aux else None
        domain = (section._info.id, section.sid, "ret", src, aux) if aux else ()
        for m in members:
            el = cs.elements.get(m)
            if el is None:  # it moved: on to where it went, as a multicast to it alone
                one = pack_header(Kind.MULTICAST | FWD, entry, src, aux, coll)
                self.rt.route_element(cs, m, one, encode((section, [m], args, kwargs)))
                continue
            reply = self.rt.contributor(domain, el, target, section, entry) if target is not None else None
            self.rt.run_entry(el, entry, args, kwargs, reply)
