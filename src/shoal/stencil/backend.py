"""The backend: tiles of the grid as elements of a chare Array.

Each :class:`Tile` owns a box of the grid plus ghost layers on every side, for every
field: ``ghost_depth`` of them, or more along the axes split into tiles where deep
passes may run (:mod:`shoal.stencil.deep_halo`). Requests from the frontend (batches
of steps, gathers, scatters, reductions) carry sequence numbers and run strictly in
order, one at a time, in an ``async`` driver; awaiting halos or a reduction lets the
PE's other tiles run.

Halos move over one channel per neighbour (:mod:`shoal.stencil.halo`); tile arrays are
laid out for the kernels as :mod:`shoal.stencil.layout` describes, in the memory of the
stencil's device (:mod:`shoal.stencil.memory`: NumPy arrays for ``device="cpu"``, GPU
memory for ``device="cuda"``, where every kernel and copy is queued on the PE's one
stream and the tile waits for it where the host needs the results: :mod:`.cuda`).
"""

from __future__ import annotations

import ctypes
from typing import Any, Callable

import numpy as np

import shoal

from .blocking import BlockStatement, TimeBlocker, cache_budget, in_order, plan
from .build import load_kernel
from .deep_halo import DeepLoop, Pass, Use, applies, ghost_depths
from .devices import Device, named
from .errors import DeviceError
from .halo import Halos
from .interface import GridSpec, tile_bounds
from .layout import aligned, first_written, whole_rows
from .lowering import tile_box
from .nodes import Read, walk
from .numpy_eval import run_reduction, run_statement
from .program import Batch, Check, Loop, ReductionEntry, StatementEntry, Step

__all__ = ["Tile"]

_REDUCERS = {"max": "max", "maxabs": "max", "min": "min", "sum": "sum", "sumsq": "sum"}
_EMPTY = {"max": -np.inf, "maxabs": -np.inf, "min": np.inf, "sum": 0.0, "sumsq": 0.0}
_COMPARE: dict[str, Callable[[float, float], bool]] = {
    "lt": lambda a, b: a < b, "le": lambda a, b: a <= b, "gt": lambda a, b: a > b, "ge": lambda a, b: a >= b,
}


#: loop bodies whose blocking plan a tile keeps (batches streamed by the frontend each make one)
_MAX_BLOCKERS = 64


def _steps_as_loops(items: tuple) -> list:
    """``items`` with each run of two or more consecutive steps as one loop over them, so
    a batch streamed from the frontend (``backend_freq`` steps) is blocked in time as a
    backend loop is. Same steps, same order, same checks (``check_every`` 1)."""
    out: list = []
    run: list[Step] = []
    for item in (*items, None):
        if isinstance(item, Step):
            run.append(item)
            continue
        if len(run) == 1:
            out.append(run[0])
        elif run:
            out.append(Loop(tuple(run), len(run)))
        run = []
        if item is not None:
            out.append(item)
    return out


def _device(name: str) -> Device:
    """The device ``name`` as registered on this PE; a DeviceError naming the PE otherwise."""
    try:
        return named(name)
    except ValueError as exc:
        raise DeviceError(f"PE {shoal.my_pe()}: {exc}: register the device on every PE "
                          "(shoal.stencil.devices.register, at import)") from None


def _noting(fn: Callable, mem: Any, where: str) -> Callable:
    """``fn`` that first tells ``mem`` which statement it launches: an asynchronous
    kernel's failure surfaces at a later synchronization, whose error names it."""

    def launch(*args: Any) -> None:
        mem.note(where)
        fn(*args)

    return launch


class _Prepared:
    """A statement or reduction ready to run on one tile: its box here, and a call."""

    __slots__ = ("box", "run", "steps", "aliased", "fn", "ptrs")

    def __init__(self, box: Any, run: Callable[[Any], Any], steps: tuple, aliased: bool,
                 fn: Any = None, ptrs: Any = None):
        self.box, self.run, self.steps, self.aliased = box, run, steps, aliased
        self.fn, self.ptrs = fn, ptrs  # a compiled statement's kernel and slot pointers


class Tile(Halos, shoal.Chare):
    """One box of the grid (all fields), its ghosts, and its channels to neighbours."""

    def __init__(self, spec: GridSpec, dims: tuple[int, ...]):
        index = self.index if isinstance(self.index, tuple) else (self.index,)
        self.spec = spec
        self.dims = dims
        self.lo, self.hi = tile_bounds(index, dims, spec.shape)
        self.size = [h - lo for lo, h in zip(self.lo, self.hi)]
        self.deep = applies(spec, dims)
        self.ghosts = ghost_depths(spec.shape, dims, spec.ghost, self.deep)
        local = tuple(s + 2 * g for s, g in zip(self.size, self.ghosts))
        device = _device(spec.device)
        self.mem = mem = device.memory()  # DeviceError naming this PE if its device is missing
        self.target = device.target  # what its kernels are compiled for: "cpu" or "cuda"
        self.raw: list[Any] = []
        self.arrays: list[Any] = []
        self.inner: list[tuple] = []  # device tiles: where each field's view lies in its padded array
        column = first_written(self.lo[-1], self.hi[-1], spec.ghost, self.ghosts[-1])
        g = self.ghosts[-1]
        # whole rows alias their ghost columns: host tiles only (device copies would write one place twice)
        whole = len(local) > 1 and dims[-1] == 1 and g > 0 and not mem.resident
        for dt in spec.dtypes:
            raw, view = whole_rows(local, dt, column, g) if whole else aligned(local, dt, column, mem.zeros,
                                                                               mem.address)
            self.raw.append(raw)
            self.arrays.append(view)
            if mem.resident:
                lead = (mem.address(view) - mem.address(raw)) // view.itemsize
                self.inner.append((..., slice(lead, lead + local[-1])))
        self.copy_args: dict[tuple, tuple] = {}
        self.strides = (ctypes.c_long * len(local))(*(s // self.arrays[0].itemsize for s in self.arrays[0].strides))
        self.chan: dict[tuple[int, int], shoal.Channel] = {}
        for a in range(len(dims)):
            for side in (-1, 1):
                j = index[a] + side
                if 0 <= j < dims[a]:
                    nb = index[:a] + (j,) + index[a + 1:]
                    self.chan[(a, side)] = shoal.Channel(self, remote=self.collection[nb])
        self.pending: dict[int, tuple] = {}
        self.next = 0
        self.running = False
        self.stmts: dict[int, tuple[StatementEntry, _Prepared]] = {}
        self.reds: dict[int, tuple[ReductionEntry, _Prepared]] = {}
        self.bufs: dict[tuple, Any] = {}  # receive buffers of inner-axis faces
        self.buf_ptrs: dict[tuple, int] = {}
        self.packed: dict[tuple, Any] = {}  # device tiles: send buffers of inner-axis faces
        self.split: dict[tuple, Any] = {}
        self.solve_id = -1
        self.solve_steps = 0
        self.stopped = -1
        self.piece_bytes = 0
        self.blockers: dict[tuple, Any] = {}  # per loop body: its TimeBlocker (and DeepLoop), or None
        self.blocked = {"passes": 0, "steps": 0, "calls": 0, "depth": 0, "band": 0, "lag": 0, "width": 0,
                        "lag1": 0, "k": 0, "ghost": 0, "redundant": 0}

    # -- requests, run in sequence order ------------------------------------------------
    def batch(self, batch: Batch, fut: shoal.Future) -> None:
        self._queue(batch.seq, ("batch", batch, fut))

    def gather(self, seq: int, field: int, fut: shoal.Future) -> None:
        self._queue(seq, ("gather", field, fut))

    def scatter(self, seq: int, field: int, piece: np.ndarray) -> None:
        self._queue(seq, ("scatter", field, piece))

    def reduce(self, seq: int, rid: int, fut: shoal.Future) -> None:
        self._queue(seq, ("reduce", rid, fut))

    def location(self) -> tuple:
        """This tile's index, PE and global box (for tests and reports)."""
        return self.index, shoal.my_pe(), tuple(self.lo), tuple(self.hi)

    def blocking(self) -> dict:
        """What temporal blocking did on this tile so far: passes, the steps they ran,
        kernel calls, and the last plan (depth: steps per wavefront, band, lag; width and
        lag1 where it runs in strips of axis 1); for deep
        passes (a tile with neighbours) also the last one's ``k`` (the most steps a pass
        may run between exchanges there), ``ghost`` (the deepest ghost layer its
        exchange filled) and ``redundant`` (points computed outside the owned box, all
        passes together); zeros where it never applied."""
        return dict(self.blocked, index=self.index, ghosts=self.ghosts)

    def free(self) -> None:
        self.mem.sync()
        self.arrays, self.raw = [], []
        self.bufs.clear()
        self.packed.clear()
        self.copy_args.clear()
        self.stmts.clear()
        self.blockers.clear()
        self.reds.clear()

    def _queue(self, seq: int, request: tuple) -> None:
        self.pending[seq] = request
        if not self.running:
            self.running = True
            self.proxy.drive()

    async def drive(self) -> None:
        try:
            while self.next in self.pending:
                request = self.pending.pop(self.next)
                self.next += 1
                kind = request[0]
                if kind == "batch":
                    await self._batch(request[1], request[2])
                elif kind == "gather":
                    self._gather(request[1], request[2])
                elif kind == "scatter":
                    self._scatter(request[1], request[2])
                else:
                    rid, fut = request[1], request[2]
                    entry, prep = self.reds[rid]
                    self.contribute(self._partial(entry, prep), getattr(shoal.reducers, _REDUCERS[entry.kind]), fut)
        finally:
            self.running = False

    def _owned(self) -> tuple[slice, ...]:
        return tuple(slice(g, g + s) for g, s in zip(self.ghosts, self.size))

    def _gather(self, field: int, fut: shoal.Future) -> None:
        piece = self.mem.to_host(self.arrays[field][self._owned()])
        self.contribute((self.lo, self.hi, piece), shoal.reducers.gather, fut)

    def _scatter(self, field: int, piece: np.ndarray) -> None:
        self.mem.from_host(self.arrays[field][self._owned()], piece)

    # -- batches ---------------------------------------------------------------------------
    async def _batch(self, batch: Batch, fut: shoal.Future) -> None:
        for e in batch.statements:
            self.stmts[e.sid] = (e, self._prepare_statement(e))
        for r in batch.reductions:
            self.reds[r.rid] = (r, self._prepare_reduction(r))
        if batch.solve != self.solve_id:
            self.solve_id, self.solve_steps = batch.solve, 0
        converged = -1
        if self.stopped != batch.solve:
            items = _steps_as_loops(batch.items) if self._may_block() else batch.items
            for item in items:
                if isinstance(item, Loop):
                    if await self._loop(item):
                        converged = self.solve_steps
                else:
                    assert isinstance(item, Step)
                    self.solve_steps += 1
                    if await self._step(item.ops, item.check):
                        converged = self.solve_steps
                if converged >= 0:
                    self.stopped = batch.solve
                    break
        self.mem.sync()  # a batch is done when its kernels are (and a failed one is reported here)
        self.contribute(converged, shoal.reducers.max, fut)

    async def _loop(self, item: Loop) -> bool:
        """Run a backend loop; True if a check stopped it (``solve_steps`` is then the
        step it stopped at). Several steps per pass where temporal blocking applies: on
        a tile with no neighbours, or in deep passes (one exchange per pass)."""
        p = len(item.body)
        blocker, deep = self._blocker(item)
        i = 0
        while i < item.steps:
            if blocker is not None:
                depth = blocker.plan.depth if deep is None else deep.steps(i % p)
                t = self._pass_length(item, i, depth)
                if t >= 1 and (deep is None or t >= 2):
                    if deep is None:
                        calls = blocker.run(i % p, t)
                    else:
                        calls = await self._deep_pass(blocker, deep, i % p, t)
                    self.solve_steps += t
                    i += t
                    b = self.blocked
                    b["passes"] += 1
                    b["steps"] += t
                    b["calls"] += calls
                    b.update(blocker.plan._asdict())
                    check = item.body[(i - 1) % p].check
                    if check is not None and self.solve_steps % item.check_every == 0 and await self._check(check):
                        return True
                    continue
            step = item.body[i % p]
            i += 1
            self.solve_steps += 1
            check = step.check if self.solve_steps % item.check_every == 0 else None
            if await self._step(step.ops, check):
                return True
        return False

    async def _deep_pass(self, blocker: TimeBlocker, deep: DeepLoop, start: int, count: int) -> int:
        """Steps ``start .. start + count - 1`` of a loop body as one deep pass: the deep
        exchange, then the steps on boxes grown into the ghosts; returns the kernel calls."""
        one: Pass = deep.pass_for(start, count)
        if one.plan.exchange:
            await self._exchange(("x", one.plan.exchange, True), None)
        b = self.blocked
        b["k"] = deep.steps(start)
        b["ghost"] = one.plan.depth
        b["redundant"] += one.redundant

        def statements() -> list[list[BlockStatement]]:
            out = []
            for i0, i1 in one.steps:
                out.append([self._block_statement(sid)._replace(box=box)
                            for sid, box in zip(one.sids[i0:i1], one.boxes[i0:i1]) if box is not None])
            return out

        return blocker.run_steps(("deep", start, count), statements)

    def _pass_length(self, item: Loop, i: int, depth: int) -> int:
        """Steps in the pass starting at step ``i`` of ``item``: up to ``depth``, ending
        at the first step with a convergence check (it runs between passes)."""
        p = len(item.body)
        t = min(depth, item.steps - i)
        for j in range(1, t + 1):
            if item.body[(i + j - 1) % p].check is not None and (self.solve_steps + j) % item.check_every == 0:
                return j
        return t

    def _may_block(self) -> bool:
        """Whether temporal blocking can apply on this tile: a CPU, a grid of 2 or more
        axes, not turned off, and no neighbours (no ghosts to exchange between steps)
        or deep passes possible (ghosts exchanged once per pass)."""
        spec = self.spec
        return spec.device == "cpu" and spec.time_blocking and len(self.size) >= 2 and (not self.chan or self.deep)

    def _block_statement(self, sid: int) -> BlockStatement:
        """Statement ``sid`` as the wavefront driver calls it, on its box here."""
        entry, prep = self.stmts[sid]
        return BlockStatement(ctypes.cast(prep.fn, ctypes.c_void_p).value or 0, prep.ptrs, prep.box,
                              prep.steps, entry.lowered.binding, entry.accesses)

    def _blocker(self, item: Loop) -> tuple[TimeBlocker | None, DeepLoop | None]:
        """The temporal blocker of ``item`` on this tile, and its deep passes where the
        tile has neighbours; None where it does not apply: a GPU, a 1-d grid,
        ``time_blocking=False``, or a statement run with NumPy or through scratch (then
        the same on every tile: all run plain steps and exchange alike)."""
        if not self._may_block():
            return None, None
        key = tuple(step.ops for step in item.body)
        if key in self.blockers:
            return self.blockers[key]
        if len(self.blockers) >= _MAX_BLOCKERS:  # a frontend streaming ever-new step sequences
            self.blockers.clear()
        found: tuple[TimeBlocker | None, DeepLoop | None] = (None, None)
        per_step: list[list[BlockStatement]] = []
        uses: dict[int, Use] = {}
        ok = True
        for step in item.body:
            stmts = []
            for op in step.ops:
                if op[0] != "s":
                    continue  # an exchange: none on a tile with no neighbours; deep passes plan their own
                entry, prep = self.stmts[op[1]]
                if prep.fn is None or prep.aliased:
                    ok = False
                    break
                targets = (entry.lowered.binding[0],) + tuple(entry.lowered.binding[slot]
                                                              for slot, _, _ in entry.lowered.kernel.more)
                uses[op[1]] = Use(targets, entry.accesses, entry.lowered.box)
                stmts.append(self._block_statement(op[1]))
            per_step.append(stmts)
        if ok and uses:
            fields = {f for u in uses.values() for f in (*u.targets, *(f for f, _ in u.accesses))}
            layer = sum(self.raw[f].strides[0] for f in fields)
            layers = self.size[0] + 2 * self.ghosts[0]
            rows = self.size[1] + 2 * self.ghosts[1] if len(self.size) >= 3 else 0  # 3-D: strips may do
            if not self.chan:  # the statements with a box here, every step run whole
                here = [[s for s in stmts if s.box is not None] for stmts in per_step]
                how = plan(here, layer, layers, cache_budget(), rows=rows) if any(here) else None
                if how is not None:
                    found = (TimeBlocker(here, how, self.strides, len(self.size), self.spec.cflags), None)
            else:  # deep passes: every statement (a box grown into the ghosts may reach here)
                how = plan(per_step, layer, layers, cache_budget(), rows=rows) or in_order(per_step, layers)
                split = [d > 1 for d in self.dims]
                deep = DeepLoop([step.ops for step in item.body], uses, split, self.ghosts, self.lo, self.hi,
                                set(self.chan))
                found = (TimeBlocker(per_step, how, self.strides, len(self.size), self.spec.cflags), deep)
        self.blockers[key] = found
        return found

    async def _check(self, check: Check) -> bool:
        """Evaluate a convergence check over all tiles."""
        entry, prep = self.reds[check.rid]
        partial = self._partial(entry, prep)
        total = await self.allreduce(partial, getattr(shoal.reducers, _REDUCERS[entry.kind]))
        if entry.finish == "sqrt":
            total = float(np.sqrt(total))
        return _COMPARE[check.op](total, check.threshold)

    async def _step(self, ops: tuple, check: Check | None) -> bool:
        i, n = 0, len(ops)
        while i < n:
            op = ops[i]
            if op[0] == "s":
                self._run(op[1], None)
                i += 1
            else:
                nxt = ops[i + 1] if i + 1 < n and ops[i + 1][0] == "s" else None
                await self._exchange(op, nxt[1] if nxt else None)
                i += 2 if nxt else 1
        if check is None:
            return False
        return await self._check(check)

    # -- statements ---------------------------------------------------------------------------
    def _ptrs(self, binding: tuple, scratch: Any) -> Any:
        data = [self.mem.address(self.arrays[f]) for f in binding]
        if scratch is not None:
            data.append(self.mem.address(scratch))
        return (ctypes.c_void_p * len(data))(*data)

    def _on_host(self, fields: set[int], written: set[int], run: Callable[[list], Any]) -> Any:
        """``run(arrays)`` with NumPy on host copies of ``fields`` (device tiles: NumPy
        cannot read device memory; the other entries are None), then the fields
        ``written`` copied back whole. Slow (whole fields cross the bus), but NumPy's bits."""
        arrays: list[Any] = [None] * len(self.arrays)
        raws = {}
        for f in fields | written:
            raws[f] = self.mem.to_host(self.raw[f])
            arrays[f] = raws[f][self.inner[f]]
        out = run(arrays)
        for f in written:
            self.mem.from_host(self.raw[f], raws[f])
        return out

    def _prepare_statement(self, e: StatementEntry) -> _Prepared:
        low = e.lowered
        box = tile_box(low.box, self.lo, self.hi, self.ghosts)
        steps = low.kernel.steps
        if e.source is None:
            stmt, offsets = e.stmt, e.offsets
            if self.mem.resident:
                fields, written = {f for f, _ in e.accesses}, {stmt.target.field}

                def run_numpy(tb: Any) -> None:
                    self._on_host(fields, written, lambda arrays: run_statement(stmt, offsets, steps, arrays, tb))
            else:
                arrays = self.arrays

                def run_numpy(tb: Any) -> None:
                    run_statement(stmt, offsets, steps, arrays, tb)

            return _Prepared(box, run_numpy, steps, low.kernel.scratch)
        fn = load_kernel(e.source, False, self.spec.fast_math, self.spec.cflags, where=f"{e.where}: ",
                         device=self.target)
        scratch = None
        if low.kernel.scratch and box is not None:
            count, dt = int(np.prod([n for _, n in box])), low.kernel.target_dtype or "float64"
            scratch = self.mem.empty((count,), dt)  # the kernel writes it: the tile's memory
        ptrs = self._ptrs(low.binding, scratch)
        strides = self.strides
        d = len(steps)
        keep = (scratch, self.arrays)  # the kernel holds raw pointers to these: keep them alive
        more = self.mem.kernel_args  # CUDA: the stream
        launch = _noting(fn, self.mem, e.where) if self.mem.resident else fn

        def run_c(tb: Any) -> None:
            b = (ctypes.c_long * d)(*(x for x, _ in tb))
            n = (ctypes.c_long * d)(*(x for _, x in tb))
            launch(ptrs, b, n, strides, *more)
            assert keep

        if box is not None:
            b0 = (ctypes.c_long * d)(*(x for x, _ in box))
            n0 = (ctypes.c_long * d)(*(x for _, x in box))
            whole = box

            def run_c_fast(tb: Any) -> None:
                if tb is whole:
                    launch(ptrs, b0, n0, strides, *more)
                else:
                    run_c(tb)

            return _Prepared(box, run_c_fast, steps, low.kernel.scratch, fn, ptrs)
        return _Prepared(box, run_c, steps, low.kernel.scratch, fn, ptrs)

    def _prepare_reduction(self, r: ReductionEntry) -> _Prepared:
        low = r.lowered
        box = tile_box(low.box, self.lo, self.hi, self.ghosts)
        steps = low.kernel.steps
        if r.source is None:
            expr, offsets, kind = r.expr, r.offsets, r.kind
            if self.mem.resident:
                fields = {n.field for n in walk(expr) if isinstance(n, Read)}
                return _Prepared(box, lambda tb: self._on_host(
                    fields, set(), lambda arrays: run_reduction(kind, expr, offsets, steps, arrays, tb)), steps, False)
            arrays = self.arrays
            return _Prepared(box, lambda tb: run_reduction(kind, expr, offsets, steps, arrays, tb), steps, False)
        fn = load_kernel(r.source, True, self.spec.fast_math, self.spec.cflags, device=self.target)
        ptrs = self._ptrs(low.binding, None)
        strides = self.strides
        d = len(steps)
        more = self.mem.reduce_args  # CUDA: the stream and the partials buffer (the kernel waits for its value)

        def run_c(tb: Any) -> float:
            b = (ctypes.c_long * d)(*(x for x, _ in tb))
            n = (ctypes.c_long * d)(*(x for _, x in tb))
            return float(fn(ptrs, b, n, strides, *more))

        return _Prepared(box, run_c, steps, False)

    def _partial(self, entry: ReductionEntry, prep: _Prepared) -> float:
        if prep.box is None:
            return float(_EMPTY[entry.kind])
        return float(prep.run(prep.box))

    def _run(self, sid: int, boxes: Any) -> None:
        entry, prep = self.stmts[sid]
        if prep.box is None:
            return
        if boxes is None:
            prep.run(prep.box)
        else:
            for tb in boxes:
                prep.run(tb)
