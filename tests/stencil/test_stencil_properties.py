"""Property tests: random statements (slices and expressions) equal NumPy bit for bit.

Hypothesis draws a grid (1–3 axes, sizes that tiles do not divide), a ghost depth, a
PE count (1–3) and an over-decomposition, then a few random statements: a target slice
(start/stop/step, negative indices and steps, integers, ``...``) and an expression tree
over reads of the fields at offsets up to the ghost depth, scalars of every kind, and
every operation. Each statement runs on stencil fields and on NumPy arrays; the fields'
bits must agree exactly (NaNs must be NaN at the same places).
"""

from __future__ import annotations

import numpy as np
import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import shoal  # noqa: E402
from shoal.stencil import Stencil, absolute, cos, exp, maximum, minimum, sin, sqrt, where  # noqa: E402

FIELDS = ("u", "v", "w")
SCALARS = [0.5, 0.1, -3, 2, 1e-3, 7.0, -0.0, np.float32(1.25), np.float64(0.3), np.float32(-2.5)]
EXPONENTS = [2, 0.5, -1, 3, 1.5, 2.0, 1, 0]
UNARY = [lambda a: -a, abs, absolute, sqrt, exp, sin, cos]
BINARY = [
    lambda a, b: a + b, lambda a, b: a - b, lambda a, b: a * b, lambda a, b: a / b,
    minimum, maximum,
]
COMPARE = [lambda a, b: a < b, lambda a, b: a <= b, lambda a, b: a > b, lambda a, b: a >= b,
           lambda a, b: a == b, lambda a, b: a != b]


class Grid(Stencil):
    fields = {"u": "float64", "v": "float64", "w": "float32"}


def positions(sl: slice | int, n: int) -> list[int]:
    if isinstance(sl, int):
        return [sl % n]
    return list(range(*sl.indices(n)))


@st.composite
def target_axis(draw, n):
    """An index for one axis: an int (maybe negative) or a slice."""
    if draw(st.integers(0, 4)) == 0:
        i = draw(st.integers(0, n - 1))
        return i - n if draw(st.booleans()) else i
    step = draw(st.sampled_from([1, 1, 1, 2, -1, 3]))
    start = draw(st.one_of(st.none(), st.integers(-n, n - 1)))
    stop = draw(st.one_of(st.none(), st.integers(-n - 1, n)))
    return slice(start, stop, step)


def shifted(sl: slice | int, n: int, offset: int) -> slice | int | None:
    """The index selecting ``sl``'s positions moved by ``offset`` (None if off the grid)."""
    pos = [p + offset for p in positions(sl, n)]
    if any(not 0 <= p < n for p in pos):
        return None
    if isinstance(sl, int):
        return pos[0] - n if sl < 0 else pos[0]
    step = sl.indices(n)[2]
    if not pos:
        return slice(0, 0, step)
    first, last = pos[0], pos[-1]
    stop = last + (1 if step > 0 else -1)
    return slice(first, None if stop < 0 else stop, step)


@st.composite
def statement(draw, shape, ghost, target=None):
    d = len(shape)
    if target is None:
        target = tuple(draw(target_axis(n)) for n in shape)
    name = draw(st.sampled_from(FIELDS))

    def read():
        for _ in range(10):
            offs = [draw(st.integers(-ghost, ghost)) for _ in range(d)]
            idx = tuple(shifted(t, n, o) for t, n, o in zip(target, shape, offs))
            if all(i is not None for i in idx):
                return ("read", draw(st.sampled_from(FIELDS)), idx)
        return ("read", draw(st.sampled_from(FIELDS)), target)

    def expr(depth):
        kind = draw(st.integers(0, 9 if depth > 0 else 2))
        if kind <= 1:
            return read()
        if kind == 2:
            return ("scalar", draw(st.sampled_from(SCALARS)))
        if kind in (3, 4):
            return ("unary", draw(st.integers(0, len(UNARY) - 1)), expr(depth - 1))
        if kind in (5, 6, 7):
            a = expr(depth - 1)
            b = expr(depth - 1) if a[0] != "scalar" else read()
            if draw(st.booleans()):
                a, b = b, a
            return ("binary", draw(st.integers(0, len(BINARY) - 1)), a, b)
        if kind == 8:
            base = expr(depth - 1)
            if base[0] == "scalar" or (base[0] == "unary" and base[2][0] == "scalar"):
                base = read()
            return ("pow", base, draw(st.sampled_from(EXPONENTS)))
        return ("where", draw(st.integers(0, len(COMPARE) - 1)), read(), expr(depth - 1), expr(depth - 1))

    value = expr(3)
    if value[0] == "scalar" and draw(st.booleans()):
        value = read()
    # write the index with '...' when its leading axes are whole
    index = target
    if d > 1 and all(t == slice(None, None, 1) for t in target[:-1]) and draw(st.booleans()):
        index = (Ellipsis, target[-1])
    return name, index, value


def build(tree, f):
    kind = tree[0]
    if kind == "read":
        return f[tree[1]][tree[2]]
    if kind == "scalar":
        return tree[1]
    if kind == "unary":
        return UNARY[tree[1]](build(tree[2], f))
    if kind == "binary":
        return BINARY[tree[1]](build(tree[2], f), build(tree[3], f))
    if kind == "pow":
        return build(tree[1], f) ** tree[2]
    c = COMPARE[tree[1]](build(tree[2], f), build(tree[3], f))
    return where(c, build(tree[3], f), build(tree[4], f))


def run_numpy(stmts, arrays):
    for name, index, value in stmts:
        v = build(value, arrays)
        if np.ndim(v) == 0 or np.shape(v) == np.shape(arrays[name][index]):
            arrays[name][index] = v
    return arrays


def bits_equal(a: np.ndarray, b: np.ndarray) -> bool:
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    na, nb = np.isnan(a), np.isnan(b)
    if not np.array_equal(na, nb):
        return False
    ia = a.view(np.uint64 if a.dtype == np.float64 else np.uint32)
    ib = b.view(ia.dtype)
    return bool(np.array_equal(ia[~na], ib[~nb]))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_random_statements_equal_numpy_bit_for_bit(data):
    d = data.draw(st.integers(1, 3), label="axes")
    shape = tuple(data.draw(st.lists(st.integers(3, 11 if d < 3 else 7), min_size=d, max_size=d), label="shape"))
    ghost = data.draw(st.integers(1, 2), label="ghost")
    pes = data.draw(st.integers(1, 3), label="pes")
    odf = data.draw(st.integers(1, 3), label="odf")
    if data.draw(st.booleans(), label="one box"):  # statements over one box: fused into groups
        box = tuple(data.draw(target_axis(n)) for n in shape)
        stmts = data.draw(st.lists(statement(shape, ghost, box), min_size=2, max_size=4), label="statements")
    else:
        stmts = data.draw(st.lists(statement(shape, ghost), min_size=1, max_size=3), label="statements")
    seed = data.draw(st.integers(0, 2**16), label="seed")
    rng = np.random.default_rng(seed)
    init = {
        "u": rng.standard_normal(shape),
        "v": rng.standard_normal(shape) * 3,
        "w": rng.standard_normal(shape).astype(np.float32),
    }
    with np.errstate(all="ignore"):
        want = run_numpy(stmts, {k: a.copy() for k, a in init.items()})
    out = {}

    def main(args):
        g = Grid(shape, ghost_depth=ghost, odf=odf)
        for k, a in init.items():
            getattr(g, k).from_numpy(a)
        fields = {k: getattr(g, k) for k in FIELDS}
        with np.errstate(all="ignore"):
            for name, index, value in stmts:
                v = build(value, fields)
                if not hasattr(v, "shape") or v.shape == () or v.shape == fields[name][index].shape:
                    fields[name][index] = v
        out.update({k: f.to_numpy() for k, f in fields.items()})

    assert shoal.run(main, [], transport="inproc", pes=pes, deadlock_timeout=5.0) == 0
    for k in FIELDS:
        assert bits_equal(out[k], want[k]), (k, shape, stmts)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_random_loop_bodies_time_blocked_equal_numpy(data):
    """Random statements as the step of ``solve(steps=k)`` on one tile, where temporal
    blocking runs several steps per pass (in 4-layer bands: the cache budget is patched
    to half the tile), against the same statements run k times with NumPy."""
    import shoal.stencil.backend as backend
    from shoal.stencil.blocking import plan

    shape = (data.draw(st.integers(30, 70), label="rows"), data.draw(st.integers(3, 12), label="columns"))
    ghost = data.draw(st.integers(1, 2), label="ghost")
    # interior boxes, so that reads at offsets in both axes fit: statements read what
    # earlier ones (this step and the last) wrote, layers away
    boxes = [(slice(ghost, -ghost), slice(ghost, -ghost)), (slice(2, -2, 2), slice(1, -1)),
             (slice(-ghost - 1, ghost - 1, -1), slice(None)), (slice(ghost, -ghost), slice(0, 2))]
    stmts = [data.draw(statement(shape, ghost, data.draw(st.sampled_from(boxes), label="box")), label="statement")
             for _ in range(data.draw(st.integers(2, 4), label="statements"))]
    steps = data.draw(st.integers(3, 11), label="steps")
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16), label="seed"))
    init = {"u": rng.standard_normal(shape), "v": rng.standard_normal(shape) * 3,
            "w": rng.standard_normal(shape).astype(np.float32)}
    want = {k: a.copy() for k, a in init.items()}
    with np.errstate(all="ignore"):
        for _ in range(steps):
            run_numpy(stmts, want)
    out: dict = {}

    class Loop(Grid):
        def step(self):
            fields = {k: getattr(self, k) for k in FIELDS}
            for name, index, value in stmts:
                v = build(value, fields)
                if not hasattr(v, "shape") or v.shape == () or v.shape == fields[name][index].shape:
                    fields[name][index] = v

    def main(args):
        g = Loop(shape, ghost_depth=ghost)
        for k, a in init.items():
            getattr(g, k).from_numpy(a)
        with np.errstate(all="ignore"):
            g.solve(steps=steps)
        out.update({k: getattr(g, k).to_numpy() for k in FIELDS})
        out["blocked"] = g._handle.tiles.blocking(ret=True).get()[0]["steps"]

    def half_the_tile(per_step, layer, layers, budget, **options):
        return plan(per_step, layer, layers, layer * (layers // 2), **options)

    real = backend.plan
    backend.plan = half_the_tile
    try:
        assert shoal.run(main, [], transport="inproc", pes=1, deadlock_timeout=5.0) == 0
    finally:
        backend.plan = real
    hypothesis.event(f"blocked: {out['blocked'] > 0}")
    for k in FIELDS:
        assert bits_equal(out[k], want[k]), (k, shape, stmts)
