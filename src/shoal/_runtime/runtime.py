"""One PE's runtime: its state, job control, and the step of its scheduler loop.

``step()`` polls the transport, runs every delivered message's handler, then the
ready coroutines and due timers. What a message does when it arrives is in
:mod:`.receiving`, how messages leave in :mod:`.sending` (both parts of
:class:`Runtime`). Nothing here blocks: waiting is the engine's business.
"""

from __future__ import annotations

import heapq
import time
from collections import deque

TYPE_CHECKING = False  # typing is for type checkers: a PE's start-up skips its import
if TYPE_CHECKING:
    from typing import Any, Callable

from ..settings import Settings
from . import chare, tree
from .chare import Chare
from .collections import CollectionInfo, CollectionState, order_blocks
from .futures import Future, Task, new_future
from .future_table import FutureTable
from .balancing import COMM_SAMPLE, Balancer, record_comm
from .devices import DeviceTransfers, transfers
from .lifecycle import Lifecycle
from .migration import Migration
from .core_contract import TickClock, attach_core
from .location import Locations
from .proxy import proxy_classes
from .quiescence import Detector
from .receive_sets import ReceiveSet
from .reductions import ReductionManager
from .sections import Sections
from .context import RunningState
from .receiving import Receiving
from .sending import Sending
from .system import SYSTEM_ID, System
from .tracing import Tracer

if TYPE_CHECKING:
    from .._transport.base import Transport
    from .engine import Engine
    from .proxy import CollectionProxy

__all__ = ["Runtime"]



class Counts:
    """A PE's message counters (for quiescence detection) and entry-call depth.

    The compiled core (:func:`.core_contract.attach_core`) has the same fields and takes
    this object's place, so its paths and the Python ones count together.
    """

    __slots__ = ("sent", "received", "depth", "calls")

    def __init__(self) -> None:
        self.sent = 0  # program messages sent
        self.received = 0  # program messages received
        self.depth = 0  # entry methods running now (nested): blocking calls are refused in them
        self.calls = 0  # entry-method runs begun: with `received`, tells one call from the next


class Runtime(Receiving, Sending, RunningState):
    """Everything one PE knows, and the handlers that change it."""

    def __init__(self, engine: "Engine", transport: "Transport", settings: Settings):
        self.engine = engine
        self.transport = transport
        self.settings = settings
        self.pe = transport.rank
        self.npes = transport.size
        self.fanout = settings.tree_fanout
        #: the node of each PE (trees cross between nodes once per node); None: one node
        self.nodes = transport.node_of
        order_blocks(self.nodes)  # the default placement keeps neighbouring blocks on a node
        self.ready: deque[Callable[[], Any]] = deque()
        self.local: deque = deque()
        self.timers: list = []
        #: why the engine's loop should ask its done() again (a future it waits for resolved,
        #: this runtime stopped): the compiled serve loop returns once this is not empty
        self.wakeups: list = []
        self.program_timers = 0  # timers of shoal.call_later() not run yet: the job is not quiescent
        self._timer_seq = 0
        self.infos: dict[int, CollectionInfo] = {}
        self.colls: dict[int, CollectionState] = {}
        self.unknown: dict[int, list] = {}  # messages for collections not created here yet
        self.destroyed: dict[int, int] = {}  # collections shoal.destroy() removed: id -> their root PE
        #: called with each collection created on this PE (shoal serve: what each client made)
        self.creation_observer: Callable[[CollectionInfo], None] | None = None
        self.locations = Locations(self.pe, self.npes)
        self.locate = self.locations.locate
        self.future_table = FutureTable()
        self._next_id = 16
        self._trees: dict[int, tree.Tree] = {}
        self.pool_workers: Any = None  # the task pool's Group, made on first use
        self.suspended: set[Task] = set()
        self.stopped = False
        self.exit_requested = False
        self.exit_code = 0
        self.idle_time = 0.0  # seconds this PE waited with nothing to do (the engine adds them up)
        self.busy_time = 0.0  # seconds in (outermost) entry methods the Python paths ran
        self.restart_state: Any = None  # PE 0: main's state in the checkpoint this run restarted from
        self.restore_seconds = 0.0  # how long rebuilding this PE's elements from it took
        self.last_checkpoint = time.monotonic()  # when main's last checkpoint_point() wrote one
        #: PE 0: the coroutine of an async main (engine.py), to tell its steps from entry methods'
        self.main_coro: Any = None
        self.detector = Detector()
        self.reductions = ReductionManager(self)
        self.lifecycle = Lifecycle(self)
        self.sections = Sections(self)
        self.migration = Migration(self)
        self.balancer = Balancer(self)
        #: device arrays in messages (devices.py), set up by the first one sent or received
        self.devices: DeviceTransfers | None = None
        self._handlers: list[Callable[..., None]] = [
            self._on_invoke,
            self._on_broadcast,
            self.sections.on_multicast,
            self._on_future,
            self._on_reduce,
            self._on_result,
            self.lifecycle.on_create,
            self.lifecycle.on_insert,
            self._on_channel,
            self.migration.on_location,
            self._on_exchange,
            self._on_await,
            self.migration.on_migrate,
            self.migration.on_fence,
            self.balancer.on_balance,
            self._on_device,
        ]
        transport.allocator = self.allocate  # type: ignore[method-assign]
        transport.device_allocator = self.allocate_device  # type: ignore[method-assign]
        transport.receive_early = self.receive_early  # type: ignore[method-assign]
        self._poll = transport.poll  # bound once: step() runs millions of times
        self._send_eager = transport.send_eager
        self._deliver_cb = self._deliver
        self._serve = transport.serve
        self._quiet = (self.local, self.ready, self.wakeups)  # what serve() returns for (see serve)
        #: makes a new element's load counters (Chare._shoal_load; the core's compact type
        #: where there is one), or None: no balancer reads loads (``--lb`` unset), so
        #: elements carry none and their calls are not timed
        self.new_load: Callable[[], Any] | None = _zero_pair if settings.lb else None
        core = self._core = attach_core(transport, self)
        self.counts: Counts = core or Counts()
        #: the compiled paths' clock in seconds (element loads and traces), None without a core
        self.ticks = TickClock(core) if core is not None else None
        #: the element whose entry method runs now (for the communication graph), or None
        self.current_element: Chare | None = None
        self._comm_countdown = COMM_SAMPLE
        if core is not None:
            core.comm = record_comm
        #: the timeline recorder (``SHOAL_TRACE``), or None: tracing off
        self.tracer: Tracer | None = None
        if settings.trace:
            from .trace_file import new_tracer  # a job that traces: its writer and bins, not every job's

            self.tracer = new_tracer(self.pe, settings.trace_summary, settings.restart)
            if core is not None:
                self.tracer.use_core(core, self.ticks)
                if self.tracer.use_messages(self.transport):  # a full timeline: message arrows
                    self.trace_frames = self.transport.compiled()[1]  # type: ignore[index]
        #: ``channel_send(channel, fallback)``: a channel's compiled ``send`` (None without a core)
        self.channel_send = core.channel_send if core is not None else None
        #: ``channel_recv(channel, fallback, future_class)``: a channel's compiled ``recv``
        self.channel_recv = core.channel_recv if core is not None else None
        #: ``set_post(set, fallback)``: a receive set's compiled ``post`` (None without a core)
        self.set_post = core.set_post if core is not None else None
        self._run_local = core.run_local if core is not None else None
        self._send_value = core.send_value if core is not None else None
        self._run_each = core.run_each if core is not None else None
        self._core_send = core.send if core is not None else None
        #: ``new_future(back)``: Future() in the frame ``back`` above the caller's
        self._new_future = core.new_future if core is not None else new_future
        if self.tracer is not None:  # futures and the queue on the timeline (summary mode: in bins)
            from .trace_futures import watch_futures
            from .trace_queue import watch_queue

            watch_futures(self, self.tracer)
            watch_queue(self, self.tracer)
        info = CollectionInfo(SYSTEM_ID, System, "group", None, 1, None, 0)
        self.infos[SYSTEM_ID] = info
        self.system: "CollectionProxy" = proxy_classes(System)[1](info)
        cs = self.colls[SYSTEM_ID] = CollectionState(info, self.system)
        cs.hosts = range(self.npes)
        cs.span = tree.over(cs.hosts, self.pe, self.fanout, self.nodes)
        cs.count = 1
        self.lifecycle.construct(cs, (self.pe,), ())

    def _on_device(self, *message: Any) -> None:
        transfers(self).on_release(*message)

    # -- identifiers -------------------------------------------------------------
    def new_id(self) -> int:
        """A job-wide unique id (collections, sections)."""
        self._next_id += 1
        return (self.pe << 32) | self._next_id

    def call_later(self, delay: float, fn: Callable[[], Any]) -> None:
        """Run ``fn`` on this PE after ``delay`` seconds (at the next step after it)."""
        self._timer_seq += 1
        heapq.heappush(self.timers, (self.engine.clock() + delay, self._timer_seq, fn))

    # -- collections -------------------------------------------------------------
    def reduction_span(self, domain: tuple, section: Any) -> tuple[tree.Tree | None, int]:
        """This PE's links in the reduction tree of ``domain`` and its local contributor count."""
        if section is not None:
            st = self.sections.state(section)
            return st.span, st.local
        cs = self.colls.get(domain[0])
        if cs is None or not cs.done:
            return None, 0
        return cs.span, cs.count

    def tree_from(self, root: int) -> tree.Tree:
        t = self._trees.get(root)
        if t is None:
            t = self._trees[root] = tree.all_pes(self.npes, root, self.pe, self.fanout, self.nodes)
        return t

    # -- job control -------------------------------------------------------------
    def close(self) -> None:
        """Stop the compiled core serving this runtime (the job is over)."""
        if self._core is not None:
            self._core.detach()
            chare.compiled_allreduce = None
            chare.Chare.contribute = chare.PYTHON_CONTRIBUTE  # type: ignore[method-assign]

    def stop(self, code: int) -> None:
        self.stopped = True
        self.exit_code = code
        self.wakeups.append("stopped")

    def wake_on(self, fut: Any) -> None:
        """Wake the engine's loop (:attr:`wakeups`) when ``fut`` resolves."""
        fut.add_done_callback(self.wakeups.append)

    def request_exit(self, code: int) -> None:
        """Start ending the job on every PE; ``code`` is this PE's wish for its exit code.

        PE 0 then asks every PE for its wish and ends the job with the first non-zero
        one by PE number (else 0), so ``shoal.exit(8)`` on one PE is not lost when main
        returns at the same time (:mod:`shoal._runtime.system`)."""
        if not self.exit_requested:
            self.exit_requested = True
            self.exit_code = code
            self.system[0].end_job()

    def quiescence(self) -> Future:
        fut = Future(_depth=3)
        self.system[0].qd_request(fut)
        return fut

    def waiting_report(self) -> list[str]:
        """What is blocked on this PE, for a deadlock report."""
        lines = [f"PE {self.pe}: {t.where} awaits {t.waiting!r}" for t in self.suspended]
        lines.extend(self.balancer.waiting_report())
        lines.extend(self.reductions.waiting_report())
        for cs in self.colls.values():
            for el in cs.elements.values():
                lines.extend(_pending_sets(el, self.pe))
            for index, msgs in cs.early.items():
                lines.append(
                    f"PE {self.pe}: {len(msgs)} message(s) wait for element {index} of "
                    f"{cs.info.cls.__qualname__}, which was never inserted"
                )
        return lines

    # -- the scheduler step ------------------------------------------------------
    def wait(self, seconds: float) -> bool:
        """Nothing is ready here: receive, letting the transport wait up to ``seconds``
        for the first message, then resume the coroutines it woke; True if any arrived."""
        if not self.transport.wait(self._deliver_cb, seconds):
            return False
        ready = self.ready
        for _ in range(len(ready)):
            ready.popleft()()
        return True

    def serve(self, seconds: float, done: Callable[[], bool] | None) -> tuple[int, float, float] | None:
        """Nothing is ready here: let the transport receive and deliver messages for as long
        as each comes within ``seconds`` of the last and nothing waits for this loop in
        Python (:meth:`shoal._transport.base.Transport.serve`): a local message, a ready
        coroutine, a wakeup, a due timer, or ``done()`` (None: only a wakeup can make the
        loop's done() true). None where the transport cannot."""
        return self._serve(self._deliver_cb, seconds, self._quiet, done, self.timers)

    def step(self) -> bool:
        """Deliver what arrived, run what is ready; True if anything happened."""
        n = self._poll(self._deliver_cb)
        local = self.local
        if local:
            if self._run_local is not None:  # compiled
                n += self._run_local(self._deliver_cb, self._deliver_direct)
            else:
                count = len(local)
                for k in range(count):
                    try:
                        header, segments = local.popleft()
                    except IndexError:
                        raise RuntimeError(broken_local_queue(self.pe, count - k, k, count, "Python")) from None
                    if header is None:
                        if segments is not None:  # None: sent on after its element (migration.SENT_ON)
                            self._deliver_direct(*segments)
                    else:
                        self._deliver(header, segments)
                    n += 1
        ready = self.ready
        if ready:
            for _ in range(len(ready)):
                ready.popleft()()
                n += 1
        timers = self.timers
        if timers and timers[0][0] <= self.engine.clock():
            _, _, fn = heapq.heappop(timers)
            fn()
            n += 1
        return n > 0


def broken_local_queue(pe: int, left: int, done: int, count: int, path: str) -> str:
    """What a RuntimeError says when the local queue is shorter than the step's count of it
    (the compiled run_local, receive.c, says the same)."""
    return (f"PE {pe}: the local queue is empty where its count says {left} message(s) wait "
            f"(in Runtime.step's local loop, {path} path, after {done} of the {count} queued when it began): "
            "only that loop may take messages out of the queue (a departing element's messages "
            "leave migration.SENT_ON in their place)")


def _pending_sets(el: Chare, pe: int) -> list[str]:
    """A line per receive set of ``el`` still waiting for messages, naming the channels."""
    sets: dict[int, tuple[Any, list]] = {}
    for ch in (el._shoal_channels or {}).values():
        w = ch.waiting
        if isinstance(w, ReceiveSet):
            sets.setdefault(id(w), (w, []))[1].append(ch)
    return [f"PE {pe}: {w!r} waits for {len(chs)} message(s), on " + ", ".join(map(repr, chs))
            for w, chs in sets.values()]


def _zero_pair() -> Any:
    """Load counters for the Python paths: [seconds, ticks]."""
    import numpy as np

    return np.zeros(2)
