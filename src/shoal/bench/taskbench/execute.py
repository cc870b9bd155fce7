"""Running tasks: one point's buffers, the compiled kernel call, validation, the timer.

Every system under test keeps one :class:`PointRunner` per point it owns and calls
``runner.execute(t)`` once the point's inputs for timestep ``t`` are in
``runner.rows`` (row ``k`` holds the output of the ``k``-th producer listed by
``graph.inputs(t, point)``). The compiled code checks each input's size and every
``(timestep, point)`` pair in it, writes this task's pairs into ``runner.output``,
checks the scratch sentinel and runs the kernel. A failed check raises
:class:`ValidationError` naming the graph, the task, the input and what was found.
"""

from __future__ import annotations

import ctypes
import time
from typing import Callable

import numpy as np

from .graph import TaskGraph
from .kernels import KernelStruct, PointStruct, library

__all__ = ["ValidationError", "PointRunner", "Timer", "imbalance_iterations", "kernel_struct"]


class ValidationError(RuntimeError):
    """A task received wrong data: a dependency was mis-delivered, corrupted or lost."""


def kernel_struct(g: TaskGraph) -> KernelStruct:
    k = g.kernel
    return KernelStruct(k.type.code, k.iterations, k.samples, k.imbalance, g.graph_index)


def imbalance_iterations(g: TaskGraph, timestep: int, point: int) -> int:
    """The iterations the load_imbalance kernel runs for task ``(timestep, point)``."""
    ks = g._cache.get("kernel_struct")
    if ks is None:
        ks = g._cache["kernel_struct"] = kernel_struct(g)
    return int(library().tb_imbalance_iterations(ctypes.byref(ks), timestep, point))


_EMPTY = np.zeros(1, dtype=np.int64)


class PointRunner:
    """The buffers and tasks of one point of one graph."""

    __slots__ = ("graph", "point", "message", "header", "output", "inputs", "rows", "input_bytes", "scratch",
                 "corrupt_step", "_struct", "_ref", "_plan", "_call", "_keep")

    def __init__(self, graph: TaskGraph, point: int, header_words: int = 0, corrupt: tuple[int, int] | None = None):
        """``header_words`` > 0 puts that many int64s before the output in ``message``
        (``header``), for systems that send routing data and output as one array.
        ``corrupt=(t, p)`` damages the output of task ``(t, p)`` once written, to show
        that its consumers catch it (``--corrupt``)."""
        lib = library()
        ob, sb = graph.output_bytes_per_task, graph.scratch_bytes_per_task
        n = max(graph.max_inputs(), 1)
        self.graph, self.point = graph, point
        self.corrupt_step = corrupt[0] if corrupt is not None and corrupt[1] == point else -1
        self.message = np.zeros(8 * header_words + ob, dtype=np.uint8)
        self.header = self.message[: 8 * header_words].view(np.int64)
        self.output = self.message[8 * header_words :]
        self.inputs = np.zeros((n, ob), dtype=np.uint8)
        #: row k receives the output of the k-th producer of the current task
        self.rows = [self.inputs[k] for k in range(n)]
        #: size of each input as received (systems that learn sizes set them)
        self.input_bytes = np.full(n, ob, dtype=np.int64)
        self.scratch = np.zeros(max(sb, 8), dtype=np.uint8)
        if sb:
            lib.tb_prepare_scratch(self.scratch.ctypes.data, sb)
        self._struct = PointStruct(
            kernel_struct(graph), self.output.ctypes.data, ob, self.inputs.ctypes.data, ob,
            self.input_bytes.ctypes.data, self.scratch.ctypes.data if sb else None, sb, 0, 0, 0, 0,
        )
        self._ref = ctypes.byref(self._struct)
        self._call = lib.tb_execute_point
        # per timestep: (producers, pointer to them as int64s); arrays shared by equal plans
        arrays: dict[tuple[int, ...], np.ndarray] = {}
        plan = []
        for t in range(graph.timesteps):
            deps = graph.inputs(t, point)
            arr = arrays.get(deps)
            if arr is None:
                arr = arrays[deps] = np.array(deps, dtype=np.int64) if deps else _EMPTY
            plan.append((deps, arr.ctypes.data))
        self._plan = plan
        self._keep = arrays  # noqa: B018 - the arrays must outlive their pointers

    def execute(self, timestep: int) -> None:
        """Run task ``(timestep, point)`` on the inputs in ``rows``; raise if any is wrong."""
        deps, ptr = self._plan[timestep]
        code = self._call(self._ref, timestep, self.point, ptr, len(deps))
        if code:
            raise self._error(code, timestep, deps)
        if timestep == self.corrupt_step:
            self.output[8:16] = np.array([self.point + 1000], dtype=np.int64).view(np.uint8)

    def reset(self) -> None:
        """Fresh buffers for another run of the same graph."""
        self.output[:] = 0
        self.inputs[:] = 0
        self.input_bytes[:] = self.graph.output_bytes_per_task
        if self.graph.scratch_bytes_per_task:
            library().tb_prepare_scratch(self.scratch.ctypes.data, self.graph.scratch_bytes_per_task)

    def _error(self, code: int, timestep: int, deps: tuple[int, ...]) -> Exception:
        s, g = self._struct, self.graph
        task = f"graph {g.graph_index} task (timestep {timestep}, point {self.point})"
        if code in (1, 2):
            k = s.err_input
            source = f"input {k} (from point {deps[k]} at timestep {timestep - 1})"
            if code == 1:
                return ValidationError(
                    f"Task Bench validation failed: {task}: {source} has {s.err_position} bytes, "
                    f"expected {g.output_bytes_per_task}"
                )
            return ValidationError(
                f"Task Bench validation failed: {task}: {source} is corrupted: at pair {s.err_position} "
                f"expected (timestep {timestep - 1}, point {deps[k]}) but got "
                f"(timestep {s.err_timestep}, point {s.err_point})"
            )
        if code == 4:
            return ValidationError(f"Task Bench validation failed: {task}: the scratch buffer's sentinel was overwritten")
        return ValidationError(f"Task Bench: {task}: kernel {g.kernel.type.value} cannot run (code {code})")


class Timer:
    """Wall-clock time between two fences (barriers), the reference's ``sync_time``."""

    def __init__(self, fence: Callable[[], None] = lambda: None):
        self.fence = fence
        self.started = 0.0

    def start(self) -> None:
        self.fence()
        self.started = time.perf_counter()

    def stop(self) -> float:
        self.fence()
        return time.perf_counter() - self.started
