"""What the frontend sends: unique statements, and the per-step list of operations.

The :class:`Recorder` turns each recorded statement into a table entry (once per
unique statement: checked, lowered, printed, compiled) and the step's operations:

* ``("x", ((field, lo_depths, hi_depths), ...), corners)`` — exchange ghosts,
  inferred from the offsets the next statement reads (an explicit
  ``exchange_ghosts`` asks for one too, merged with the next inferred one);
* ``("s", sid)`` — run statement ``sid`` on every tile; consecutive statements over
  the same box that can share a loop nest become one *group* statement.

A :class:`Batch` carries the entries the backend has not seen and a list of items:
``Steps`` (recorded steps, each with an optional convergence check) or a ``Loop``
(a body of steps repeated ``count`` times, sent once).
"""

from __future__ import annotations

import warnings
from typing import Any, NamedTuple, Sequence

from .analysis import StatementInfo, analyze, numpy_only_reason
from ..compiler import find_cc
from .build import compiler_status, load_kernel
from .lowering import Lowered, lower_group, lower_reduction, lower_statement
from .nodes import Assign, Node, dumps, reads
from .printer_c import print_kernel
from .printer_cuda import print_cuda_kernel

__all__ = ["StatementEntry", "ReductionEntry", "Check", "Step", "Loop", "Batch", "Recorder"]


class StatementEntry(NamedTuple):
    sid: int
    stmt: Assign
    offsets: tuple[tuple[int, ...], ...]
    lowered: Lowered
    source: str | None  # C source, or None: run with NumPy
    where: str  # the user's file:line and text, for messages
    numpy_reason: str | None
    accesses: tuple = ()  # (field, offsets) of every read
    members: tuple = ()  # a statement group: the ids of its statements
    info: Any = None


class ReductionEntry(NamedTuple):
    rid: int
    kind: str
    expr: Node
    offsets: tuple[tuple[int, ...], ...]
    lowered: Lowered
    source: str | None
    finish: str  # "none" or "sqrt" (the L2 norm)


class Check(NamedTuple):
    """Stop when ``reduction <op> threshold`` (op: lt, le, gt, ge)."""

    rid: int
    op: str
    threshold: float


class Step(NamedTuple):
    ops: tuple
    check: Check | None


class Loop(NamedTuple):
    body: tuple[Step, ...]
    steps: int
    check_every: int = 1


class Batch(NamedTuple):
    seq: int
    solve: int  # convergence in solve k skips the rest of solve k's batches
    statements: tuple[StatementEntry, ...]
    reductions: tuple[ReductionEntry, ...]
    items: tuple  # Step and Loop items, in order


def _fusable(e: StatementEntry) -> bool:
    """A compiled statement that needs no scratch copy can join a group."""
    return e.source is not None and not e.lowered.kernel.scratch and not e.members


def _fits(run: list[StatementEntry], e: StatementEntry) -> bool:
    """Whether ``e`` may share the loop nest of ``run`` and keep NumPy's meaning."""
    if e.lowered.box != run[0].lowered.box:
        return False
    target = e.stmt.target.field
    for prev in run:
        written = prev.stmt.target.field
        if any(f == written and any(off) for f, off in e.accesses):
            return False  # e reads, at another point, what prev writes
        if any(f == target and any(off) for f, off in prev.accesses):
            return False  # e writes what prev reads at another point
    return True


class _Valid(NamedTuple):
    lo: tuple[int, ...]
    hi: tuple[int, ...]
    corners: bool

    def covers(self, lo: Sequence[int], hi: Sequence[int], corners: bool) -> bool:
        return (all(a >= b for a, b in zip(self.lo, lo)) and all(a >= b for a, b in zip(self.hi, hi))
                and (self.corners or not corners))


class Recorder:
    """The frontend's record of a stencil program (no data, no backend)."""

    def __init__(self, field_names: list[str], field_dtypes: list[str], ndim: int, ghost_depth: int,
                 backend: str, fast_math: bool, cflags: Sequence[str], target: str = "cpu"):
        self.names = field_names
        self.dtypes = field_dtypes
        self.ndim = ndim
        self.ghost = ghost_depth
        #: how the user made the stencil, for errors that name the option to change there
        self.made_by = "initialize()"
        self.fast_math = fast_math
        self.cflags = tuple(cflags)
        self.target = target  # what kernels compile for: "cpu" (C) or "cuda"
        self.printer = print_cuda_kernel if target == "cuda" else print_kernel
        if backend == "auto":
            backend = "c" if find_cc() else "numpy"
            if backend == "numpy":
                warnings.warn(compiler_status() + " (same results, slower)", RuntimeWarning, stacklevel=4)
        self.backend = backend
        self.statements: dict[str, StatementEntry] = {}
        self.reductions: dict[str, ReductionEntry] = {}
        self.unsent: list[Any] = []
        self.unsent_reductions: list[Any] = []
        self.valid: dict[int, _Valid] = {}
        self.explicit: set[int] = set()
        self.ops: list = []
        self._sids: dict[int, StatementEntry] = {}

    # -- statements ----------------------------------------------------------------
    def statement(self, stmt: Assign, where: str) -> None:
        """Record ``stmt`` into the current step (checks raise here, at the user's line)."""
        text = dumps(stmt)
        entry = self.statements.get(text)
        if entry is None:
            info = analyze(stmt, self.dtypes, self.names, self.ghost, self.made_by)
            entry = self._entry(stmt, info, where)
            self.statements[text] = entry
            self.unsent.append(entry)
        if entry.lowered.box and any(n == 0 for _, _, n in entry.lowered.box):
            return
        self._exchanges_for(entry.accesses)
        self.ops.append(("s", entry.sid))
        self.valid.pop(stmt.target.field, None)

    def _entry(self, stmt: Assign, info: StatementInfo, where: str) -> StatementEntry:
        lowered = lower_statement(stmt, info, self.dtypes, self.fast_math)
        point = all(a.squeezed for a in stmt.target.axes)
        reason = None if self.fast_math else numpy_only_reason(stmt.value, self.dtypes, point, self.target)
        source = None
        if self.backend == "c" and reason is None:
            source = self.printer(lowered.kernel, where.replace("*/", "* /"))
            self._build(source, False, where)  # errors surface here
        accesses = tuple((r.field, off) for r, off in zip(reads(stmt.value), info.offsets))
        return StatementEntry(len(self.statements), stmt, info.offsets, lowered, source, where, reason,
                              accesses, (), info)

    def _exchanges_for(self, accesses: Sequence[tuple[int, tuple[int, ...]]]) -> None:
        """Insert the exchanges that reads ``(field, offsets)`` need before them."""
        need: dict[int, list] = {}
        for field, off in accesses:
            if not any(off) and field not in self.explicit:
                continue
            lo, hi, corners = need.setdefault(field, [[0] * self.ndim, [0] * self.ndim, False])
            for k, d in enumerate(off):
                lo[k] = max(lo[k], -d)
                hi[k] = max(hi[k], d)
            if sum(1 for d in off if d) > 1:
                need[field][2] = True
        if not need and not self.explicit:
            return
        for f in self.explicit:
            need.setdefault(f, [[0] * self.ndim, [0] * self.ndim, False])
            need[f][0] = [self.ghost] * self.ndim
            need[f][1] = [self.ghost] * self.ndim
        self.explicit.clear()
        todo = []
        corners = False
        for f, (lo, hi, c) in sorted(need.items()):
            v = self.valid.get(f)
            if not any(lo) and not any(hi):
                continue
            if v is not None and v.covers(lo, hi, c):
                continue
            todo.append((f, tuple(lo), tuple(hi)))
            self.valid[f] = _Valid(tuple(lo), tuple(hi), c)
            corners = corners or c
        if todo:
            self._add_exchange(todo, corners)

    def _add_exchange(self, todo: list, corners: bool) -> None:
        """Append an exchange, or merge it into the step's last one when no statement
        since then wrote these fields (fewer rounds of messages, longer statement runs)."""
        last = max((i for i, op in enumerate(self.ops) if op[0] == "x"), default=None)
        if last is not None:
            by_sid = self._by_sid()
            fields = {f for f, _, _ in todo}
            written = {by_sid[op[1]].stmt.target.field for op in self.ops[last + 1:] if op[0] == "s"}
            if not fields & written:
                merged = {f: (lo, hi) for f, lo, hi in self.ops[last][1]}
                for f, lo, hi in todo:
                    if f in merged:
                        lo0, hi0 = merged[f]
                        lo, hi = tuple(map(max, lo, lo0)), tuple(map(max, hi, hi0))
                    merged[f] = (lo, hi)
                items = tuple((f, lo, hi) for f, (lo, hi) in sorted(merged.items()))
                self.ops[last] = ("x", items, self.ops[last][2] or corners)
                return
        self.ops.append(("x", tuple(todo), corners))

    def exchange(self, fields: Sequence[int]) -> None:
        """An explicit ``exchange_ghosts``: merged into the next statement's exchange."""
        self.explicit.update(fields)

    def invalidate(self) -> None:
        """Forget which ghosts are valid (before a loop body, after a loop)."""
        self.valid.clear()

    def take_step_ops(self) -> tuple:
        if self.explicit:
            self._exchanges_for(())  # pending explicit exchanges at the end of a step
        ops, self.ops = tuple(self.ops), []
        return self._fuse(ops)

    # -- statement groups ------------------------------------------------------------------
    def _fuse(self, ops: tuple) -> tuple:
        """Merge runs of consecutive statements into groups (one loop nest each)."""
        out: list = []
        run: list[StatementEntry] = []

        def close() -> None:
            if len(run) == 1:
                out.append(("s", run[0].sid))
            elif run:
                out.append(("s", self._group(run).sid))
            run.clear()

        by_sid = self._by_sid()
        for op in ops:
            if op[0] != "s":
                close()
                out.append(op)
                continue
            e = by_sid[op[1]]
            if not _fusable(e):
                close()
                out.append(op)
            elif run and not _fits(run, e):
                close()
                run.append(e)
            else:
                run.append(e)
        close()
        return tuple(out)

    def _by_sid(self) -> dict[int, StatementEntry]:
        if len(self._sids) != len(self.statements):
            self._sids = {e.sid: e for e in self.statements.values()}
        return self._sids

    def _group(self, run: list[StatementEntry]) -> StatementEntry:
        key = "group " + " ".join(str(e.sid) for e in run)
        entry = self.statements.get(key)
        if entry is None:
            lowered = lower_group([e.stmt for e in run], [e.info for e in run], self.dtypes, self.fast_math)
            where = " | ".join(e.where for e in run)
            source = self.printer(lowered.kernel, where.replace("*/", "* /"))
            self._build(source, False, where)
            accesses = tuple(a for e in run for a in e.accesses)
            entry = StatementEntry(len(self.statements), run[0].stmt, (), lowered, source, where, None,
                                   accesses, tuple(e.sid for e in run), None)
            self.statements[key] = entry
            self.unsent.append(entry)
        return entry

    # -- reductions ------------------------------------------------------------------
    def reduction(self, kind: str, expr: Node, finish: str, where: str) -> ReductionEntry:
        """The entry of a reduction of ``expr``; the exchanges it needs go into the step."""
        rs = reads(expr)
        if not rs:
            raise ValueError("a reduction needs an expression that reads a field")
        base = rs[0]
        offsets = tuple(tuple(a.start - b.start for a, b in zip(r.axes, base.axes)) for r in rs)
        box_stmt = Assign(base, expr)
        info = analyze(box_stmt, self.dtypes, self.names, self.ghost, self.made_by)
        key = f"{kind} {finish} {dumps(expr)}"
        entry = self.reductions.get(key)
        if entry is None:
            lowered = lower_reduction(kind, expr, base.axes, info.offsets, self.dtypes, self.fast_math)
            reason = None if self.fast_math else numpy_only_reason(expr, self.dtypes, device=self.target)
            source = None
            if self.backend == "c" and reason is None:
                source = self.printer(lowered.kernel, f"{kind} {where}".replace("*/", "* /"))
                self._build(source, True, where)
            entry = ReductionEntry(len(self.reductions), kind, expr, info.offsets, lowered, source, finish)
            self.reductions[key] = entry
            self.unsent_reductions.append(entry)
        self._exchanges_for(tuple(zip((r.field for r in rs), offsets)))
        return entry

    def _build(self, source: str, reduce: bool, where: str) -> None:
        """Compile (and load) a kernel now, so that a compiler error names the statement."""
        load_kernel(source, reduce, self.fast_math, self.cflags, where=f"{where}: ", device=self.target)

    def take_unsent(self) -> tuple[tuple, tuple]:
        s, r = tuple(self.unsent), tuple(self.unsent_reductions)
        self.unsent.clear()
        self.unsent_reductions.clear()
        return s, r
