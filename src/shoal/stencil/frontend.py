"""The frontend: a :class:`Stencil` records statements; batches of steps go to a backend.

Two spellings, one machinery:

* the CharmStencil style — ``__init__`` calls ``self.initialize(n, interface=...,
  backend_freq=..., odf=..., num_fields=...)`` and unpacks the fields it returns,
  ``iterate(*args)`` returns whether to go on, ``solve(*args)`` loops over it;
* the shoal style — ``fields = {"u": "float64", ...}`` on the class, the grid shape
  given to the constructor, a ``step()`` method, and ``solve(steps=..., until=...)``,
  which sends the time loop to the backend once.

Nothing is computed on the frontend: each statement is checked and recorded, every
``backend_freq`` steps the recorded steps go to the backend while the frontend goes on
recording. Values come back with ``field.to_numpy()`` and reductions' ``.get()``.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from . import devices
from .errors import DeviceError, ShapeError, StencilError, UnsupportedOperationError, at_user, user_location
from .expr import Condition, Expr, Field, Reduction, _operand, index_axes
from .interface import GridSpec, Interface, connect
from .nodes import DTYPES, Assign, Read
from .program import Batch, Check, Recorder, Step
from .solving import TimeLoop

__all__ = ["Stencil"]

class Stencil(TimeLoop):
    """Base class of stencil programs: subclass it, write each time step with NumPy
    slicing on its fields, and :meth:`solve`.

    Two spellings, one machinery. The shoal spelling declares ``fields`` on the class
    and passes the grid shape and the options to the constructor, with a ``step()``
    method::

        class Heat(Stencil):
            fields = {"u": "float64", "v": "float64"}

            def step(self):
                self.v[1:-1] = self.u[1:-1] + 0.25 * (self.u[:-2] - 2 * self.u[1:-1] + self.u[2:])
                self.u, self.v = self.v, self.u

        heat = Heat((1000,), odf=2)               # Heat(shape, **options)
        steps = heat.solve(steps=10_000, until=lambda: norm(heat.u - heat.v, np.inf) < 1e-6, check_every=10)

    The CharmStencil spelling overrides ``__init__``, calls
    ``self.initialize(n, **options)`` and unpacks the fields it returns, defines
    ``iterate(*args)`` (returns whether to go on) and calls ``solve(*args)``.

    Options of the constructor and of :meth:`initialize` (keyword arguments):

    ==================  ============  ==========================================================
    option              default       meaning
    ==================  ============  ==========================================================
    ``backend_freq``    10            steps per batch sent to the backend
    ``odf``             1             tiles per PE (over-decomposition)
    ``ghost_depth``     1             ghost layers per side: the deepest offset a statement may read
    ``dtype``           "float64"     one dtype for every field, or one per field (float64, float32)
    ``num_fields``      None          without ``fields``: how many unnamed fields (None: one)
    ``backend``         "auto"        "c" (compiled kernels), "numpy", or "auto": C where a compiler exists
    ``fast_math``       False         compile with ``-ffast-math`` and libm's ``exp``/``pow``: faster, not bit-exact
    ``cflags``          ()            extra compiler flags
    ``max_inflight``    2             batches the frontend may run ahead of the backend
    ``frontend_tiles``  True          with several PEs, whether PE 0 (the frontend) hosts tiles too
    ``device``          "cpu"         "cuda": statements as CUDA kernels (:class:`DeviceError` without a GPU)
    ``time_blocking``   True          several steps of a backend loop per pass where that is exact
    ``interface``       None          the backend (:class:`Interface`); None: the PEs of this job
    ==================  ============  ==========================================================

    Options of :meth:`solve`:

    ==================  ============  ==========================================================
    option              default       meaning
    ==================  ============  ==========================================================
    ``steps``           None          shoal spelling: run ``step()`` this many times, as one backend loop
    ``until``           None          a condition (``norm(u - v, np.inf) < 1e-6``) or a function returning one
    ``check_every``     1             evaluate ``until`` every this many steps (on the backend, no round trip)
    ==================  ============  ==========================================================
    """

    #: shoal style: field names (and dtypes) of the subclass, e.g. {"u": "float64"}
    fields: Any = None

    def __init__(self, shape: Any = None, **options: Any):
        """shoal style: ``Heat((256, 256), odf=2, ghost_depth=1)`` with ``fields`` on the class;
        ``shape`` is the grid shape and ``options`` those of :meth:`initialize`."""
        if self.fields is None:
            raise TypeError(
                f"{type(self).__name__}: declare `fields = {{'u': 'float64', ...}}` on the class, "
                "or override __init__ and call self.initialize(...)"
            )
        if shape is None:
            raise TypeError(f"{type(self).__name__}(shape, ...): the grid shape is required")
        self._made_by = f"{type(self).__name__}(shape, ...)"  # named in errors about its options
        self.initialize(shape, fields=self.fields, **options)

    # -- set-up ---------------------------------------------------------------------
    def initialize(
        self,
        n: Any,
        interface: Interface | None = None,
        backend_freq: int = 10,
        odf: int = 1,
        num_fields: int | None = None,
        ghost_depth: int = 1,
        dtype: Any = "float64",
        fields: Any = None,
        backend: str = "auto",
        fast_math: bool = False,
        cflags: Sequence[str] = (),
        max_inflight: int = 2,
        frontend_tiles: bool = True,
        device: str = "cpu",
        time_blocking: bool = True,
    ) -> Any:
        """Create the grid's fields on the backend; returns the field handles (one handle
        if there is one unnamed field, else a tuple). The options and their defaults are
        in the table of :class:`Stencil`.

        ``n``: an int (an n×n grid) or a shape tuple (1-, 2- or 3-d, any sizes);
        ``fields``: names (or {name: dtype}); else ``num_fields`` unnamed fields;
        ``dtype``: one dtype, or one per field; ``odf``: tiles per PE;
        ``backend_freq``: steps per batch sent to the backend; ``ghost_depth``: ghost
        layers per side; ``cflags``: extra compiler flags; ``max_inflight``: batches
        the frontend may run ahead of the backend;
        ``backend``: "auto" (C where a compiler exists), "c" or "numpy";
        ``fast_math``: let the compiler reorder floating-point math (results may then
        differ from NumPy in the last bits); ``interface``: the backend to use (None:
        the PEs of this job); ``frontend_tiles=False``: with several PEs, keep PE 0 for
        the frontend and put the tiles on the other PEs only; ``device="cuda"``: run the
        compiled statements as CUDA kernels on tiles in GPU memory, halos exchanged
        device to device (needs CuPy, a GPU and nvcc; raises :class:`DeviceError`
        otherwise);
        ``time_blocking=False``: run every step of a backend loop as its own pass over
        the tile, even where several steps per pass would be exact (see blocking.py).
        """
        shape = (int(n), int(n)) if isinstance(n, (int, np.integer)) else tuple(int(s) for s in n)
        if not 1 <= len(shape) <= 3 or any(s < 1 for s in shape):
            raise at_user(ValueError, f"grid shape {shape} must have 1 to 3 positive sizes")
        if ghost_depth < 0:
            raise at_user(ValueError, f"ghost_depth={ghost_depth} must be at least 0")
        if backend_freq < 1:
            raise at_user(ValueError, f"backend_freq={backend_freq} must be at least 1")
        if odf < 1:
            raise at_user(ValueError, f"odf={odf} must be at least 1")
        if backend not in ("auto", "c", "numpy"):
            raise at_user(ValueError, f"backend={backend!r}: use 'auto', 'c' or 'numpy'")
        try:
            dev = devices.named(device)
        except ValueError as exc:
            raise at_user(ValueError, str(exc)) from None
        if dev.name != "cpu":
            why = dev.missing()
            if why is not None:
                raise at_user(DeviceError, f"device={device!r} cannot run here: {why}; "
                              "use device='cpu' (the default)")
            if backend == "numpy":
                raise at_user(ValueError, f"device={device!r} runs compiled kernels: it needs backend='auto' or 'c'")
        names, dtypes = _field_table(fields, num_fields, dtype)
        self.shape = shape
        self.ghost_depth = ghost_depth
        self.backend_freq = backend_freq
        self._fields = [Field(self, i, nm, dt) for i, (nm, dt) in enumerate(zip(names, dtypes))]
        self._rec = Recorder(names, dtypes, len(shape), ghost_depth, backend, fast_math, cflags, dev.target)
        self._rec.made_by = getattr(self, "_made_by", None) or "self.initialize(...)"
        self._iface = connect(interface)
        spec = GridSpec(shape, tuple(names), tuple(dtypes), ghost_depth, odf, fast_math, tuple(cflags), frontend_tiles,
                        self._rec.backend, device, bool(time_blocking))
        self._handle = self._iface.create(spec)
        self._steps: list[Step] = []
        self._items: list = []
        self._inflight: list = []
        self._max_inflight = max(1, max_inflight)
        self._seq = 0
        self._solve = 0
        #: how the last solve() was sent: "loop" (one backend loop) or "steps" (batches of steps)
        self.solve_mode = ""
        if fields is not None:
            for f in self._fields:
                setattr(self, f.name, f)
        handles = tuple(self._fields)
        return handles[0] if len(handles) == 1 and fields is None else handles

    @property
    def backend(self) -> str:
        """Where statements run: "c" (compiled kernels) or "numpy" (the NumPy evaluator)."""
        return self._rec.backend

    def describe(self) -> str:
        """The tiles, PEs and backend of this stencil, in one line."""
        kernels = "CUDA kernels" if self._rec.target == "cuda" else "C kernels"
        return f"{self._iface.describe(self._handle)}; statements run with {kernels if self.backend == 'c' else 'NumPy'}"

    # -- statements -----------------------------------------------------------------
    def _assign(self, field: Field, idx: Any, value: Any) -> None:
        if field._st is not self:
            raise at_user(UnsupportedOperationError, f"field {field.name!r} belongs to another stencil")
        axes = index_axes(idx, self.shape, field.name)
        target = Read(field.id, axes)
        tshape = target.shape
        taxes = tuple(k for k, a in enumerate(axes) if not a.squeezed)
        node, meta = _operand(value, "assignment")
        if isinstance(value, (Expr, Field)) and value._st is not self:
            raise at_user(UnsupportedOperationError, "the value reads fields of another stencil")
        if meta.dtype == "bool":
            raise at_user(UnsupportedOperationError, "assigning a comparison is not supported; use where(condition, 1.0, 0.0)")
        if meta.shape is not None:
            if meta.shape != tshape:
                raise at_user(
                    ShapeError,
                    f"shape mismatch: cannot assign a value of shape {meta.shape} to {field.name}[...] of shape {tshape}",
                )
            if meta.axes != taxes:
                raise at_user(
                    UnsupportedOperationError,
                    f"the value indexes grid axes {meta.axes} but {field.name}[...] indexes grid axes {taxes}: "
                    "a stencil keeps axes aligned (no transposes)",
                )
        filename, line, text = user_location(2)
        where = f"{filename}:{line}: {text}"
        try:
            self._rec.statement(Assign(target, node), where)
        except StencilError as exc:
            if str(exc).startswith(f"{filename}:{line}:"):
                raise
            raise at_user(type(exc), str(exc)) from None

    def exchange_ghosts(self, *fields: Field) -> None:
        """Exchange the ghost layers of ``fields`` now (shoal also infers exchanges
        from what statements read, so this call is never needed; it is accepted)."""
        for f in fields:
            if not isinstance(f, Field) or f._st is not self:
                raise at_user(TypeError, f"exchange_ghosts() takes fields of this stencil, not {f!r}")
        self._rec.exchange([f.id for f in fields])

    # -- steps and batches ----------------------------------------------------------
    def _end_step(self, check: Condition | None = None) -> None:
        c = self._check(check) if check is not None else None
        self._steps.append(Step(self._rec.take_step_ops(), c))

    def _check(self, cond: Any) -> Check:
        if not isinstance(cond, Condition):
            raise at_user(TypeError, f"until= must give a condition such as norm(u - v, np.inf) < 1e-6, not {cond!r}")
        red = cond.reduction
        entry = self._rec.reduction(red.kind, red.expr.node, red.finish, _where())
        return Check(entry.rid, cond.op, cond.threshold)

    def _flush(self, wait: bool = False) -> list:
        """Send what was recorded; returns the results of the batches completed."""
        if self._rec.ops or self._rec.explicit:
            self._end_step()
        if self._steps:
            self._items.extend(self._steps)
            self._steps = []
        done = []
        if self._items or self._rec.unsent or self._rec.unsent_reductions:
            statements, reductions = self._rec.take_unsent()
            batch = Batch(self._seq_next(), self._solve, statements, reductions, tuple(self._items))
            self._items = []
            self._inflight.append(self._iface.submit(self._handle, batch))
        limit = 0 if wait else self._max_inflight
        while len(self._inflight) > limit:
            done.append(self._inflight.pop(0).get())
        return done

    def sync(self) -> None:
        """Wait until the backend has run everything recorded so far."""
        self._flush(wait=True)

    # -- values back and forth ------------------------------------------------------
    def _gather(self, field: Field) -> np.ndarray:
        self._flush()
        return self._iface.gather(self._handle, field.id, self._seq_next()).get()

    def _scatter(self, field: Field, array: Any) -> None:
        a = np.asarray(array)
        if a.shape != self.shape:
            raise at_user(ShapeError, f"from_numpy: array of shape {a.shape} does not match the grid {self.shape}")
        self._flush()
        self._iface.scatter(self._handle, field.id, a.astype(field.dtype, copy=False), self._seq_next())
        self._rec.valid.pop(field.id, None)

    def _seq_next(self) -> int:
        s = self._seq
        self._seq += 1
        return s

    def _reduce(self, red: Reduction) -> Any:
        entry = self._rec.reduction(red.kind, red.expr.node, red.finish, _where())
        self._flush()
        return self._iface.reduce(self._handle, entry.rid, entry.finish, self._seq_next())

    # convenience spellings: self.norm(expr), self.sum(expr), self.max(expr)
    def norm(self, x: Any, ord: Any = 2) -> Reduction:
        """``norm(x, ord)``: the L2 (``ord=2``, the default) or max (``ord=np.inf``) norm
        of a field or expression, as a :class:`Reduction`."""
        from .expr import norm

        return norm(x, ord)

    def sum(self, x: Any) -> Reduction:
        """``total(x)``: the sum of a field or expression over the grid, as a :class:`Reduction`."""
        from .expr import total

        return total(x)

    def max(self, x: Any) -> Reduction:
        """``maximum_of(x)``: the largest value of a field or expression, as a :class:`Reduction`."""
        from .expr import maximum_of

        return maximum_of(x)

    def close(self) -> None:
        """Wait for the backend and free its tiles."""
        if getattr(self, "_handle", None) is not None:
            self.sync()
            self._iface.destroy(self._handle)
            self._handle = None


def _where() -> str:
    filename, line, text = user_location(2)
    return f"{filename}:{line}: {text}"


def _field_table(fields: Any, num_fields: int | None, dtype: Any) -> tuple[list[str], list[str]]:
    if fields is not None:
        if isinstance(fields, dict):
            names = [str(k) for k in fields]
            dtypes = [np.dtype(v).name for v in fields.values()]
        else:
            names = [str(k) for k in fields]
            dtypes = _dtypes(dtype, len(names))
        if num_fields is not None and num_fields != len(names):
            raise at_user(ValueError, f"num_fields={num_fields} but {len(names)} field names were given")
    else:
        count = 1 if num_fields is None else int(num_fields)
        if count < 1:
            raise at_user(ValueError, f"num_fields={count} must be at least 1")
        names = [f"field{i}" for i in range(count)]
        dtypes = _dtypes(dtype, count)
    for nm, dt in zip(names, dtypes):
        if dt not in DTYPES:
            raise at_user(ValueError, f"field {nm!r} has dtype {dt}; stencil fields are float64 or float32")
    if len(set(names)) != len(names):
        raise at_user(ValueError, f"field names must be unique: {names}")
    return names, dtypes


def _dtypes(dtype: Any, count: int) -> list[str]:
    if isinstance(dtype, (list, tuple)):
        if len(dtype) != count:
            raise at_user(ValueError, f"{len(dtype)} dtypes given for {count} fields")
        return [np.dtype(d).name for d in dtype]
    return [np.dtype(dtype).name] * count

