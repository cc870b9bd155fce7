"""Reductions: combining contributions up a tree of PEs (the reducers are in :mod:`.reducers`).

A reduction is named by a *domain* (whose contributions meet: a collection, a section,
or the future of one ``ret=True`` broadcast) and a sequence number (the k-th
contribution of each element). Each PE first combines its own elements' values, then
those of its children in the domain's tree, and sends one value to its parent; the
root hands the result to the target. No PE receives more than ``fanout`` messages.

An all-reduce of a whole collection that has elements on every PE, with a built-in
unordered reducer, skips the tree: the PEs exchange partial values pairwise
(:mod:`.butterfly`), so the result is ready everywhere after one message per round
instead of a trip up the tree and back down. Across nodes it takes the tree, whose two
levels cross between nodes once per node where the butterfly's last rounds would cross
at every PE. What a PE holds of one reduction, and the order values combine in, is
:mod:`.partials`.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing is for type checkers: a PE's start-up skips its import
if TYPE_CHECKING:
    from typing import Any

from ..errors import ReductionError
from . import proxy as _proxy
from .butterfly import Butterflies
from .collections import row_major
from .failures import Failure, Outcomes
from .futures import Future, future_handle
from .message import Kind, encode_call
from .partials import PENDING, Block, Partial, by_key, in_order, keyed, order_key
from .reducers import BUILTIN_IDS, BUILTIN_NAMES, BUILTINS, Reducer, as_reducer, reducers

if TYPE_CHECKING:
    from .chare import Chare
    from .runtime import Runtime

__all__ = ["Reducer", "reducers", "as_reducer", "ReductionManager", "ALLREDUCE", "EXCHANGE_REDUCERS", "TO_FUTURE",
           "TO_ENTRY"]


class _AllReduce:
    """Target meaning: send the result back to every contributor."""

    def __reduce__(self) -> str:
        return "ALLREDUCE"

    def __repr__(self) -> str:
        return "<all contributors>"


ALLREDUCE = _AllReduce()


class _ResultFuture(Future):
    """An all-reduce's result here. It resolves mostly as a message is delivered, when
    nothing runs: the coroutine awaiting it then resumes there and then, not a turn of
    the scheduler later (else it is queued, as any future's waiter)."""

    __slots__ = ()
    _resume_now = True


_EXCHANGEABLE = frozenset({"sum", "product", "max", "min", "logical_and", "logical_or", "nop", "exact_sum"})
#: the entry field of a compact REDUCE message carrying a ret=True broadcast's replies
#: (built-in reducers' compact all-reduces use 1 + their number there): its value is
#: (the broadcast's PE, [Blocks and (index, value) pairs]); RET_BLOCK: one PE's Block,
#: its values as the message's arguments and (the broadcast's PE, first) as its index
RET_GATHER = 0xFFFF
RET_BLOCK = 0xFFFE
#: the built-in reducers the compiled core combines, by its numbers (core.h's R_SUM ...
#: R_GATHER; the ufuncs given with them: add, multiply, maximum, minimum); it runs the
#: all-reduces of all but gather, and gathers the contributions of all but exact_sum
EXCHANGE_REDUCERS = ("sum", "product", "max", "min", "logical_and", "logical_or", "nop", "exact_sum", "gather")
#: the entry field of a compact REDUCE carrying a child's partial of a reduction to a
#: future, plus the reducer's number in EXCHANGE_REDUCERS: its value (owner, fid, partial)
TO_FUTURE = 0x100
#: the same for a reduction to an entry method of an element of the collection: its value
#: (index, name, args, partial), the target as _pack_target makes it
TO_ENTRY = 0x200
class ReductionManager:
    """Per-PE reduction state machine; sends go through the runtime."""

    def __init__(self, rt: "Runtime"):
        self.rt = rt
        self.partials: dict[tuple, Partial] = {}
        self.waiters: dict[tuple, list[Future]] = {}  # allreduce results awaited here
        self.butterflies = Butterflies(rt, self._wake)  # all-reduces under way here (Python path)
        #: all-reduces with contributions of elements away from home: the PEs they are on
        self.remote_waiters: dict[tuple, set[int]] = {}
        #: (element id, domain) -> (reducer name, target) of the contributions made in the
        #: running call, the call told by its mark (see _check_once)
        self.this_call: dict[tuple, tuple] = {}
        self.call_mark: tuple = ()
        #: the compiled core, once the runtime has one: every butterfly all-reduce then
        #: runs in it (_native/exchange.c), and the butterflies above have none
        self.core: Any = None

    def use_core(self, core: Any) -> None:
        """Run the butterfly all-reduces in the compiled ``core`` from now on."""
        self.core = core

    def forget_collection(self, coll: int) -> None:
        """Drop the reductions of collection ``coll`` under way here (it was destroyed)."""
        for table in (self.partials, self.waiters, self.butterflies.under_way, self.remote_waiters):
            for key in [k for k in table if isinstance(k[0], tuple) and k[0][:1] == (coll,)]:
                del table[key]
        if self.core is not None:
            self.core.exchange_forget(coll)
            self.core.gathers_forget(coll)
            self.core.contributions_forget(coll)

    def release_own(self, coll: int) -> None:
        """An element of collection ``coll`` moved in or out: the contributions of this PE's
        elements that the compiled core gathered come here (see :meth:`add_own`), and its
        reductions take this path from now on."""
        if self.core is not None:
            self.core.contributions_release(coll)

    # -- contributions the compiled core gathered (_native/contribute.c, partials.c) --
    def holds(self, coll: int, seq: int) -> int:
        """What this path holds of reduction ``seq`` of collection ``coll`` here: 0 nothing,
        1 children's partials only, 2 contributions of this PE's own elements too (the core
        then leaves the others to this path)."""
        p = self.partials.get(((coll,), seq))
        return 0 if p is None else 2 if p.own else 1

    def add_own(self, coll: int, seq: int, values: list, numbers: list, own: int, count: int, reducer: Reducer,
                target: Any, children: list) -> None:
        """``count`` arrivals of reduction ``seq`` of collection ``coll`` that the core gathered,
        ``own`` of them of this PE's elements: ``values`` combined in element order, then
        children's, into one (at the element number of the first), or one value per element
        number of ``numbers``, and ``children``, (PE, partial) pairs not combined."""
        key = ((coll,), seq)
        p = self._partial(key, reducer, target, None)
        p.values.extend(values)
        p.values.extend(value for _, value in children)
        if keyed(reducer):  # where they go among the others: their elements' indices, then PEs
            shape = self.rt.infos[coll].shape
            p.keys.extend((0, n if shape is None else next(row_major(shape, n, n + 1))) for n in numbers)
            p.keys.extend((1, src) for src, _ in children)
        p.got += count
        p.own += own
        self._maybe_done(key, p, None)

    def contributions_disagree(self, domain: tuple, seq: int, reducer: Reducer, target: Any, other: Reducer,
                               other_target: Any) -> ReductionError:
        """The error of a contribution to reduction ``seq`` of ``domain`` unlike the first."""
        return ReductionError(
            f"PE {self.rt.pe}: contributions to reduction #{seq} of {self._name(domain)} disagree: "
            f"reducer {reducer.name} with target {target!r}, then reducer {other.name} "
            f"with target {other_target!r}; every element must contribute alike"
        )

    def contributed_twice(self, el: "Chare", coll: int, seq: int, reducer: Reducer, target: Any) -> ReductionError:
        """The error of a second contribution of ``el`` in one call (see :meth:`_check_once`)."""
        return ReductionError(
            f"{el!r} contributed twice in one call to reductions of {self._name((coll,))} with reducer "
            f"{reducer.name} and target {target!r} (#{seq - 1} and #{seq}); every element contributes once "
            "per reduction. Contribute once per call, or give a second, separate reduction its own target"
        )

    def pack_entry(self, coll: int, target: Any) -> Any:
        """How ``target`` travels up collection ``coll``'s tree: (index, name, args) for an
        element's entry method of ``coll``, else None (the compiled core's question)."""
        packed = _pack_target(target, (coll,))
        return packed if type(packed) is tuple and len(packed) == 3 else None

    def unpack_entry(self, coll: int, packed: tuple) -> Any:
        """The entry-method target that :meth:`pack_entry` packed."""
        return _unpack_target(packed, (coll,), self.rt.infos)

    # -- contributions from local elements --------------------------------------
    def contribute(self, el: "Chare", value: Any, reducer: Any, target: Any, section: Any) -> None:
        """``el`` adds ``value`` to its next reduction in its collection or ``section``."""
        self._contribute(el, value, as_reducer(reducer), _check_target(target), section)

    def receive(self, src: int, domain: tuple, seq: int, payload: tuple) -> None:
        """A child's partial result, or the contribution of an element away from home
        (a REDUCE message's payload from PE ``src``; an element's PE and key come last)."""
        reducer, target, value, section = payload[:4]
        target = _unpack_target(target, domain, self.rt.infos)
        reducer = _unpack_reducer(reducer)
        if len(payload) > 4:  # an element away from home
            if target is ALLREDUCE:  # it waits for the result there
                self.remote_waiters.setdefault((domain, seq), set()).add(payload[4])
            key = None if payload[5] is None else (0, payload[5])
            self.add(domain, seq, value, reducer, target, 1, section, key, own=1)
            return
        core = self.core
        if core is not None and section is None and len(domain) == 1 and core.contribution_offer(src, domain[0], seq, reducer, target, value):
            return  # the core gathers this reduction here (_native/partials.c)
        self.add(domain, seq, value, reducer, target, 1, section, (1, src) if keyed(reducer) else None)

    def receive_block(self, coll: int, fid: int, src: int, first: int, values: tuple) -> None:
        """A child's RET_BLOCK reply to ret=True broadcast ``fid`` of PE ``src``: the values
        of a dense array's elements from number ``first`` on (a Block), or of a Group's
        element ``first`` (a pair, as Python's path makes one)."""
        if self.core is not None and self.core.gather_offer(coll, fid, src, first, values):
            return  # the core gathers this broadcast's values here
        shape = self.rt.infos[coll].shape
        items = [Block(first, list(values), shape)] if shape is not None else list(enumerate(values, first))
        self.add((coll, "ret", src, fid), 0, items, reducers.gather, future_handle(src, fid), 1, None)

    # -- ret=True broadcasts gathered by the compiled core (_native/broadcasts.c) ----
    def ret_key(self, coll: int, src: int, fid: int) -> tuple[tuple, Future]:
        """The domain and target of the values of ret=True broadcast ``fid`` of PE ``src``."""
        return (coll, "ret", src, fid), future_handle(src, fid)

    def holds_replies(self, coll: int, src: int, fid: int) -> bool:
        """Whether this path gathers the replies of ret=True broadcast ``fid`` of PE ``src``
        here: a child's reply came first, when the core held no gather for it, so the
        broadcast's own part must come this way too (broadcasts.c)."""
        return ((coll, "ret", src, fid), 0) in self.partials

    def ret_adopt(self, domain: tuple, target: Future, items: list, count: int, parts: list) -> None:
        """Take over a gather from the core (an element's call is pending): this PE's
        ``items`` worth ``count`` values (the pending ones come as pairs later) and what
        its children sent so far (``parts``, each a list of items)."""
        if count:
            self.add(domain, 0, items, reducers.gather, target, count, None)
        for part in parts:
            self.add(domain, 0, part, reducers.gather, target, 1, None)

    def ret_gathered(self, domain: tuple, target: Future, items: list) -> None:
        """Every value of a gather the core held is here, at the root, some as pairs."""
        self._complete((domain, 0), items, reducers.gather, target, None)

    def ret_unsendable(self, src: int, fid: int, entry: int, elements: list, values: list, exc: Exception) -> bool:
        """The values of ret=True broadcast ``fid`` of PE ``src`` that the core gathered here
        could not be sent on (``exc``): the caller hears which of this PE's ``elements``
        returned a value that cannot travel, as from one element's call. False if none
        of ``values`` (theirs, in order) is at fault."""
        for el, value in zip(elements, values):
            if value is PENDING:
                continue
            try:
                encode_call((value,), None)
            except Exception as error:  # noqa: BLE001 - what the pickler says, for the caller
                self.rt._reply_failed(el, el._shoal_funcs[entry], value, error, future_handle(src, fid).send)
                return True
        return False

    def receive_compact(self, src: int, coll: int, seq: int, rid: int, value: Any) -> None:
        """Child PE ``src``'s partial result of an all-reduce of a whole collection with a built-in
        reducer, or (``rid`` RET_GATHER) of the replies of a ``ret=True`` broadcast, whose
        ``seq`` is the future's number and ``value`` the pair (its PE, the replies)."""
        if rid == RET_GATHER:
            src, replies = value
            if self.core is not None and self.core.gather_offer(coll, seq, src, -1, replies):
                return  # the core gathers this broadcast's values here
            self.add((coll, "ret", src, seq), 0, replies, reducers.gather, future_handle(src, seq), 1, None)
            return
        if TO_ENTRY <= rid < TO_ENTRY + 0x100 or TO_FUTURE <= rid < TO_FUTURE + 0x100:
            # a child's partial of a reduction to an element's entry method or to a future
            # that came the Python way (a rendezvous-sized one): the core's, if it gathers
            # this reduction here (it may hold this PE's own part), else the manager's
            if rid >= TO_ENTRY:
                reducer = getattr(reducers, EXCHANGE_REDUCERS[rid - TO_ENTRY])
                target, value = _unpack_target(value[:3], (coll,), self.rt.infos), value[3]
            else:
                reducer = getattr(reducers, EXCHANGE_REDUCERS[rid - TO_FUTURE])
                target, value = future_handle(value[0], value[1]), value[2]
            core = self.core
            if core is not None and core.contribution_offer(src, coll, seq, reducer, target, value):
                return
            self.add((coll,), seq, value, reducer, target, 1, None, (1, src) if keyed(reducer) else None)
            return
        reducer = BUILTINS[rid - 1]
        self.add((coll,), seq, value, reducer, ALLREDUCE, 1, None, (1, src) if keyed(reducer) else None)

    def allreduce(self, el: "Chare", value: Any, reducer: Any, section: Any) -> Future:
        """``el``'s contribution to an all-reduce (``reducer`` None: sum); a future of the result."""
        fut = _ResultFuture.local(self.rt, ("an allreduce of", el))
        r = reducers.sum if reducer is None else reducer if type(reducer) is Reducer else as_reducer(reducer)
        self._contribute(el, value, r, ALLREDUCE, section, fut)
        return fut

    def _contribute(self, el: "Chare", value: Any, reducer: Reducer, target: Any, section: Any, waiter: Future | None = None) -> None:
        info = el.collection._info
        if section is None:
            domain: tuple = (info.id,)
        else:
            if (info.id, el.proxy._index) not in self.rt.sections.members(section):
                raise ReductionError(f"{el!r} contributed to {section!r}, which does not contain it")
            domain = (section._info.id, section.sid)  # a union's: the same for each collection in it
        if section is None:  # the common case: a number, not a dict, on each element
            seq = el._shoal_seq
            el._shoal_seq = seq + 1
        else:
            seqs = el._shoal_seqs
            if seqs is None:
                seqs = el._shoal_seqs = {}
            seq = seqs.get(domain, 0)
            seqs[domain] = seq + 1
        if waiter is None:
            self._check_once(el, domain, reducer, target, seq)
        if reducer.ordered:
            value = [(order_key(el, section), value)]
        if waiter is not None:
            if section is None and reducer.name in _EXCHANGEABLE and not el._shoal_away and self.rt.nodes is None:
                cs = self.rt.colls.get(domain[0])  # the one element here: straight to the butterfly
                if cs is not None and cs.done and cs.count == 1 and len(cs.hosts) == self.rt.npes:
                    self._exchange((domain, seq), value, reducer, waiter)
                    return
            self.waiters.setdefault((domain, seq), []).append(waiter)
        self.add_from(el, domain, seq, value, reducer, target, section)

    def add_from(self, el: "Chare", domain: tuple, seq: int, value: Any, reducer: Reducer, target: Any, section: Any) -> None:
        """Element ``el``'s contribution. Reductions count contributions at each
        element's home PE, so trees and counts never change when elements move: an
        element away from home sends its contribution there (and, for an all-reduce,
        the home sends the result back)."""
        key = None
        if keyed(reducer):  # where its value goes among the others
            key = el.index if section is None else order_key(el, section)
        if not el._shoal_away:
            self.add(domain, seq, value, reducer, target, 1, section, None if key is None else (0, key), own=1)
            return
        home = el.collection._info.home(el.proxy._index, self.rt.npes)
        payload = (domain, _pack_reducer(reducer), _pack_target(target, domain), value, section, self.rt.pe, key)
        self.rt.post(home, Kind.REDUCE, 0, seq, domain[0], (), payload)

    def _check_once(self, el: "Chare", domain: tuple, reducer: Reducer, target: Any, seq: int) -> None:
        """Refuse a second contribute() to the same reducer and target in one call of an
        element: it would silently join the next reduction, which the other elements
        have not reached, and corrupt both totals."""
        # a call is told from the next by the entry methods begun and the messages received
        # here since: a coroutine resumes only after one of them resolved what it awaited.
        # So only this call's contributions are kept (per PE, not per element)
        counts = self.rt.counts
        mark = (counts.calls, counts.received)
        marks = self.this_call
        if mark != self.call_mark:
            self.call_mark = mark
            marks.clear()
        key = (id(el), domain)
        last = marks.get(key)
        if last is not None and last[0] == reducer.name and (last[1] is target or last[1] == target):
            raise self.contributed_twice(el, domain[0], seq, reducer, target)
        marks[key] = (reducer.name, target)

    def contribute_block(self, domain: tuple, block: Block, pending: int, target: Future) -> None:
        """This PE's values of a ``ret=True`` broadcast, all at once: each but the
        ``pending`` ones (``PENDING``: they come as pairs) counts as one contribution."""
        count = len(block.values) - pending
        if count:
            self.add(domain, 0, [block], reducers.gather, target, count, None)

    def contribute_result(self, domain: tuple, el: "Chare", value: Any, target: Future, section: Any,
                          entry: int) -> None:
        """The return value of one element of a ``ret=True`` broadcast or multicast (in a
        union, ordered by the element's collection first, in the union's order)."""
        key = (domain, 0)
        if key not in self.partials and not el._shoal_away:
            p = self.partials[key] = Partial(reducers.gather, target, section)
            p.entry = entry
        self.add_from(el, domain, 0, [(order_key(el, section), value)], reducers.gather, target, section)

    def _replies_unsendable(self, domain: tuple, p: Partial, items: list, exc: Exception) -> bool:
        """A ret=True broadcast's replies gathered here could not be sent on (``exc``):
        the caller hears which of this PE's elements returned a value that cannot travel,
        as from one element's call (the compiled path: :meth:`ret_unsendable`). False if
        no reply of this PE is at fault (or the entry method is not known here)."""
        if p.entry < 0 or not isinstance(p.target, Future):
            return False
        section = p.section
        for item in items:
            if type(item) is Block:
                continue
            order, value = item
            try:
                encode_call((value,), None)
            except Exception as error:  # noqa: BLE001 - what the pickler says, for the caller
                if section is None:
                    coll, index = domain[0], order
                elif section.others:  # a union: (its part, the index)
                    coll, index = section.parts[order[0]][0].id, order[1]
                else:
                    coll, index = section.parts[0][0].id, order
                cs = self.rt.colls.get(coll)
                el = cs.elements.get(index) if cs is not None else None
                if el is None:
                    return False
                self.rt._reply_failed(el, el._shoal_funcs[p.entry], value, error, p.target.send)
                return True
        return False

    # -- combining ---------------------------------------------------------------
    def add(self, domain: tuple, seq: int, value: Any, reducer: Reducer, target: Any, count: int, section: Any,
            order: Any = None, own: int = 0) -> None:
        """Add ``value`` worth ``count`` arrivals (1 local contribution or 1 child), at
        ``order`` among the others (an unordered reducer's; see :class:`.partials.Partial`); ``own``:
        of this PE's own elements."""
        key = (domain, seq)
        p = self.partials.get(key)
        if p is None or p.reducer is not reducer or p.target is not target:
            p = self._partial(key, reducer, target, section)
        p.values.append(value)
        if order is not None:
            p.keys.append(order)
        p.got += count
        p.own += own
        self._maybe_done(key, p, section)

    def _partial(self, key: tuple, reducer: Reducer, target: Any, section: Any) -> Partial:
        """The partial of reduction ``key`` here (made if new), whose reducer and target
        must be ``reducer`` and ``target``."""
        p = self.partials.get(key)
        if p is None:
            p = self.partials[key] = Partial(reducer, target, section)
        elif (reducer is not p.reducer and reducer.name != p.reducer.name) or (
            target is not p.target and target != p.target
        ):
            raise self.contributions_disagree(key[0], key[1], p.reducer, p.target, reducer, target)
        return p

    def resume_collection(self, coll: int) -> None:
        """Re-check the partials of collection ``coll`` once its tree became known here."""
        if self.partials:
            for key, p in list(self.partials.items()):
                if key[0][0] == coll and key in self.partials:
                    self._maybe_done(key, p, p.section)

    def _maybe_done(self, key: tuple, p: Partial, section: Any) -> None:
        domain = key[0]
        if section is None:  # reduction_span, inlined for the common case
            cs = self.rt.colls.get(domain[0])
            if cs is None or not cs.done:
                return
            span, local = cs.span, cs.count
            if (p.target is ALLREDUCE and p.reducer.name in _EXCHANGEABLE and len(cs.hosts) == self.rt.npes
                    and self.rt.nodes is None):  # across nodes, the node-aware tree: once per node
                if p.got == local:  # this PE's elements are in: start the butterfly
                    del self.partials[key]
                    value = p.reducer.combine(by_key(p)) if len(p.values) > 1 else p.values[0]
                    self._exchange(key, value, p.reducer)
                return
        else:
            span, local = self.rt.reduction_span(domain, section)
        if span is None or p.got < local + len(span.children):
            return
        del self.partials[key]
        try:
            value = p.reducer.combine(by_key(p)) if len(p.values) > 1 or p.reducer.ordered else p.values[0]
        except ReductionError as exc:
            raise ReductionError(f"PE {self.rt.pe}, reduction #{key[1]} of {self._name(domain)}: {exc}") from None
        if span.parent >= 0:
            rid = BUILTIN_IDS.get(p.reducer.name) if p.target is ALLREDUCE and len(domain) == 1 else None
            if rid is not None:  # compact: the reducer's number in the entry field, the value alone
                self.rt.post_value(span.parent, Kind.REDUCE, rid + 1, key[1], domain[0], value)
                return
            if len(domain) == 4 and section is None:  # a ret=True broadcast's replies (coll, "ret", src, fid)
                try:
                    self.rt.post_value(span.parent, Kind.REDUCE, RET_GATHER, domain[3], domain[0], (domain[2], value))
                except Exception as exc:
                    if not self._replies_unsendable(domain, p, value, exc):
                        raise
                return
            payload = (domain, _pack_reducer(p.reducer), _pack_target(p.target, domain), value, section)
            try:
                self.rt.post(span.parent, Kind.REDUCE, 0, key[1], domain[0], (), payload)
            except Exception as exc:
                if not self._replies_unsendable(domain, p, value, exc):
                    raise
            return
        try:
            self._complete(key, value, p.reducer, p.target, section)
        except Exception as exc:
            if not self._replies_unsendable(domain, p, value, exc):
                raise

    def _complete(self, key: tuple, value: Any, reducer: Reducer, target: Any, section: Any) -> None:
        """At the root: put ``value`` in order, finish it and hand it to ``target``."""
        if reducer.ordered:
            value, plain = in_order(value)
            failed = None if plain else next((v for v in value if isinstance(v, Failure)), None)
            if failed is not None:  # a ret=True broadcast in which elements raised (each sent its
                if isinstance(target, Future):  # error already): every outcome, for a future
                    target.send(Outcomes(failed.exc, value))  # that wants them (each_outcome)
                return
        if reducer.finish is not None:
            value = reducer.finish(value)
        self.deliver(key, value, target, section)

    def deliver(self, key: tuple, value: Any, target: Any, section: Any) -> None:
        """Hand a finished reduction to its target (at the root of the tree)."""
        if target is ALLREDUCE:
            self.on_result(key[0], key[1], value, section)
        elif isinstance(target, Future):
            target.send(value)
        else:
            target(value)

    def on_result(self, domain: tuple, seq: int, value: Any, section: Any) -> None:
        """An all-reduce result reached this PE: pass it down, wake local contributors."""
        span, _ = self.rt.reduction_span(domain, section)
        assert span is not None
        for child in span.children:
            if len(domain) == 1:  # compact: the value alone
                self.rt.post_value(child, Kind.RESULT, 1, seq, domain[0], value)
            else:
                self.rt.post(child, Kind.RESULT, 0, seq, domain[0], (), (domain, value, section))
        self._wake((domain, seq), value)

    def _wake(self, key: tuple, value: Any) -> None:
        """An all-reduce result is here: resolve this PE's waiters, and send it to the
        PEs of contributors away from home."""
        for pe in self.remote_waiters.pop(key, ()):
            self.rt.post(pe, Kind.RESULT, 2, key[1], key[0][0], (), (key[0], value))
        for fut in self.waiters.pop(key, ()):
            fut._resolve(value)

    def on_remote_result(self, domain: tuple, seq: int, value: Any) -> None:
        """An all-reduce result for contributors of this PE away from their home."""
        for fut in self.waiters.pop((domain, seq), ()):
            fut._resolve(value)

    # -- the butterfly all-reduce ------------------------------------------------
    def _exchange(self, key: tuple, value: Any, reducer: Reducer, waiter: Future | None = None) -> None:
        """Start the exchange rounds of all-reduce ``key`` with this PE's partial ``value``;
        ``waiter`` (if given) gets the result, as do the waiters already listed for it."""
        if self.core is not None:
            self.core.exchange(key[0][0], key[1], value, reducer, waiter)
            return
        if waiter is not None:
            self.waiters.setdefault(key, []).append(waiter)
        self.butterflies.start(key, value, reducer)

    def on_exchange(self, coll: int, seq: int, round: int, value: Any) -> None:
        """A partner's value for one round of all-reduce ``seq`` of collection ``coll``."""
        if self.core is not None:  # a value that came the Python way (rendezvous, an ordered source)
            self.core.exchange_arrive(coll, seq, round, value)
            return
        self.butterflies.arrive(((coll,), seq), round, value)

    def waiting_report(self) -> list[str]:
        """Lines for a deadlock report: reductions this PE has begun and cannot finish, and
        for a collection's own, its elements here that have not contributed (their
        count of contributions, ``_shoal_seq``, has not passed the reduction's number)."""
        lines = []
        pe = self.rt.pe
        begun = {key: [p.got, p.reducer, p.target] for key, p in self.partials.items()}
        for coll, seq, got, reducer, target in self.core.contributions_under_way() if self.core is not None else ():
            begun.setdefault(((coll,), seq), [0, reducer, target])[0] += got  # gathered by the core
        for coll, src, fid, got, expected in self.core.gathers_under_way() if self.core is not None else ():
            lines.append(self._replies_line((coll, "ret", src, fid), got, expected))
        for (domain, seq), (got, reducer, target) in begun.items():
            if len(domain) == 4 and domain[1] == "ret":
                cs = self.rt.colls.get(domain[0])
                expected = None if cs is None or cs.span is None else cs.count + len(cs.span.children)
                lines.append(self._replies_line(domain, got, expected))
                continue
            to = "an all-reduce" if target is ALLREDUCE else f"to {target!r}"
            head = f"PE {pe}: reduction #{seq} of {self._name(domain)} ({reducer.name}, {to})"
            cs = self.rt.colls.get(domain[0])
            if len(domain) > 1 or cs is None or cs.span is None:
                lines.append(f"{head} has {got} contribution(s) here and waits for more")
                continue
            missing = [index for index, el in cs.elements.items() if el._shoal_seq <= seq and not el._shoal_away]
            below = len(cs.span.children)
            text = (f"{head} has {got} of the {cs.count + below} contribution(s) it waits for here "
                    f"({cs.count} from its elements, {below} from PEs below it in the tree)")
            if missing:
                shown = ", ".join(str(i[0] if len(i) == 1 else i) for i in missing[:8])
                more = f" and {len(missing) - 8} more" if len(missing) > 8 else ""
                text += f"; element(s) {shown}{more} of this PE have not called contribute() for it"
            lines.append(text)
        return lines

    def _replies_line(self, domain: tuple, got: int, expected: int | None) -> str:
        """A deadlock report's line for the replies of a ret=True broadcast gathered here."""
        coll, _, src, fid = domain
        of = "" if expected is None else f" of the {expected}"
        return (f"PE {self.rt.pe}: the replies of a ret=True broadcast to {self._name((coll,))} (future #{fid} "
                f"of PE {src}) have {got}{of} it waits for here")

    def _name(self, domain: tuple) -> str:
        info = self.rt.infos.get(domain[0])
        what = info.cls.__qualname__ if info else f"collection {domain[0]:#x}"
        return f"{what}" + (" section" if len(domain) > 1 else "")


# Reducers and targets travel up the tree in every REDUCE message: pickling them by
# global reference costs microseconds, so built-ins go by name and futures by number.
def _pack_reducer(r: Reducer) -> Any:
    return r.name if r.name in BUILTIN_NAMES else r


def _unpack_reducer(r: Any) -> Reducer:
    return getattr(reducers, r) if type(r) is str else r


def _pack_target(t: Any, domain: tuple) -> Any:
    """A target as a REDUCE message carries it: an all-reduce's None, a future's (owner,
    number), an element of the reduction's own collection's (index, name, args), which the
    receiver knows (it holds part of that collection), else the target itself."""
    if t is ALLREDUCE:
        return None
    if isinstance(t, Future):
        return (t.owner, t.fid)
    if type(t) is _proxy.EntryRef and isinstance(t.proxy, _proxy.ElementProxy) and t.proxy._info.id == domain[0]:
        return (t.proxy._index, t.name, t.args)
    return t


def _unpack_target(t: Any, domain: tuple, infos: dict) -> Any:
    if t is None:
        return ALLREDUCE
    if type(t) is tuple:
        if len(t) == 2:
            return future_handle(*t)
        index, name, args = t
        return _proxy.EntryRef(_proxy._element(infos[domain[0]], index), name, args)
    return t


def _check_target(target: Any) -> Any:
    if isinstance(target, _proxy.BOUND_ENTRIES):  # (the module's: the compiled type joins it later)
        return _proxy.EntryRef(target.proxy, target.name)  # type: ignore[attr-defined]
    if isinstance(target, (Future, _proxy.EntryRef)):
        return target
    raise TypeError(
        f"reduction target {target!r} is not a shoal.Future or an entry method of a proxy "
        "(for example `self.collection.done` or `main_proxy[0].report`)"
    )
