"""Stage 4 (C target): print a lowered :class:`Kernel` as one C function.

One fused loop nest per statement, no temporaries: the innermost loop runs over the
contiguous axis with ``restrict`` pointers and ``#pragma GCC ivdep`` so GCC
vectorizes it. Operations are fully parenthesized in NumPy's order; scalars are
printed as hexadecimal floats, exact. The build step compiles with
``-ffp-contract=off`` and without fast-math, so the arithmetic is NumPy's, bit for bit.

Exported symbol: ``void shoal_kernel(void **ptrs, const long *b, const long *n,
const long *s)`` for a statement, ``double shoal_reduce(...)`` for a reduction, where
``ptrs`` are the slots' data (then the scratch box), ``b``/``n`` the local first index
and count per axis, and ``s`` the element strides of the tile's arrays.
"""

from __future__ import annotations

from .lowering import Kernel

__all__ = ["print_kernel", "print_copy", "print_wavefront"]

_CTYPE = {"float64": "double", "float32": "float"}
_SUFFIX = {"float64": "", "float32": "f"}
_ARITH = {"add": "+", "sub": "-", "mul": "*", "div": "/"}
_COMPARE = {"lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!="}


def _literal(value: float, dtype: str) -> str:
    if value != value:
        return f"(({_CTYPE[dtype]})NAN)"
    if value in (float("inf"), float("-inf")):
        return f"(({_CTYPE[dtype]}){'-' if value < 0 else ''}INFINITY)"
    return f"(({_CTYPE[dtype]}){value.hex()})"


class _Printer:
    def __init__(self, k: Kernel):
        self.k = k
        self.consts: dict[tuple, str] = {}  # offsets -> name of the precomputed index shift

    def shift(self, offsets: tuple[int, ...]) -> str:
        if not any(offsets):
            return ""
        name = self.consts.get(offsets)
        if name is None:
            name = self.consts[offsets] = f"c{len(self.consts)}"
        return f" + {name}"

    def expr(self, e: tuple) -> str:
        op, dt = e[0], e[1]
        if op == "load":
            return f"f{e[2]}[p{self.shift(e[3])}]"
        if op == "const":
            return _literal(e[2], dt)
        if op == "cast":
            return f"(({_CTYPE[dt]}){self.expr(e[2])})"
        if op == "one":
            return f"(({_CTYPE[dt]})1)"
        if op == "neg":
            return f"(-{self.expr(e[2])})"
        if op == "abs":
            return f"fabs{_SUFFIX[dt]}({self.expr(e[2])})"
        if op in ("sqrt", "exp", "sin", "cos"):
            return f"{op}{_SUFFIX[dt]}({self.expr(e[2])})"
        if op == "square":
            x = self.expr(e[2])
            return f"({x} * {x})"
        if op == "recip":
            return f"((({_CTYPE[dt]})1) / {self.expr(e[2])})"
        if op in _ARITH:
            return f"({self.expr(e[2])} {_ARITH[op]} {self.expr(e[3])})"
        if op in _COMPARE:
            return f"({self.expr(e[2])} {_COMPARE[op]} {self.expr(e[3])})"
        if op == "pow":
            return f"pow{_SUFFIX[dt]}({self.expr(e[2])}, {self.expr(e[3])})"
        if op == "minimum":
            return f"shoal_min{_SUFFIX[dt]}({self.expr(e[2])}, {self.expr(e[3])})"
        if op == "maximum":
            return f"shoal_max{_SUFFIX[dt]}({self.expr(e[2])}, {self.expr(e[3])})"
        if op == "where":
            return f"({self.expr(e[2])} ? {self.expr(e[3])} : {self.expr(e[4])})"
        raise ValueError(f"the C printer has no rule for {op!r}")


_PRELUDE = """\
#include <math.h>
/* NumPy's minimum/maximum: a NaN in either operand wins; on ties the second operand. */
static inline double shoal_min(double a, double b) { return isnan(a) ? a : (a < b ? a : b); }
static inline double shoal_max(double a, double b) { return isnan(a) ? a : (a > b ? a : b); }
static inline float shoal_minf(float a, float b) { return isnan(a) ? a : (a < b ? a : b); }
static inline float shoal_maxf(float a, float b) { return isnan(a) ? a : (a > b ? a : b); }
"""


def print_kernel(k: Kernel, comment: str = "") -> str:
    """The C source of kernel ``k``."""
    pr = _Printer(k)
    d = k.ndim
    value = pr.expr(k.body)
    params = []
    written = {0} if k.reduce is None else set()
    written.update(slot for slot, _, _ in k.more)
    stores = [(slot, pr.expr(e)) for slot, _, e in k.more]
    for i, dt in enumerate(k.slots):
        const = "" if i in written else "const "
        params.append(f"{const}{_CTYPE[dt]} *restrict f{i}")
    if k.scratch:
        params.append(f"{_CTYPE[k.target_dtype or 'float64']} *restrict scratch")
    params += [", ".join(f"const long b{a}" for a in range(d)), ", ".join(f"const long n{a}" for a in range(d)),
               ", ".join(f"const long s{a}" for a in range(d))]
    shifts = "".join(
        f"    const long {name} = {' + '.join(_scaled(o, a, d) for a, o in enumerate(offs) if o)};\n"
        for offs, name in pr.consts.items()
    )
    lines = [_PRELUDE, f"/* {comment} */" if comment else "", ""]
    ret = "double" if k.reduce else "void"
    lines.append(f"static __attribute__((noinline)) {ret} body({', '.join(params)})\n{{")
    lines.append(shifts.rstrip("\n"))
    if k.reduce:
        init = {"max": "-INFINITY", "maxabs": "-INFINITY", "min": "INFINITY", "sum": "0.0", "sumsq": "0.0"}[k.reduce]
        lines.append(f"    double acc = {init};")
    indent = "    "
    for a in range(d - 1):
        lines.append(f"{indent}for (long i{a} = 0; i{a} < n{a}; ++i{a}) {{")
        indent += "    "
    row = " + ".join(f"(b{a} + {k.steps[a]}L * i{a}) * s{a}" for a in range(d - 1)) or "0"
    lines.append(f"{indent}const long r = {row};")
    if k.scratch:
        srow = "0"
        for a in range(d - 1):
            srow = f"({srow}) * n{a} + i{a}"
        lines.append(f"{indent}const long q = ({srow}) * n{d - 1};")
    last = d - 1
    if not k.reduce:
        lines.append(f"{indent}#pragma GCC ivdep")
    lines.append(f"{indent}for (long i{last} = 0; i{last} < n{last}; ++i{last}) {{")
    inner = indent + "    "
    lines.append(f"{inner}const long p = r + b{last} + {k.steps[last]}L * i{last};")
    if k.reduce is None:
        dest = f"scratch[q + i{last}]" if k.scratch else "f0[p]"
        lines.append(f"{inner}{dest} = {value};")
        for slot, text in stores:
            lines.append(f"{inner}f{slot}[p] = {text};")
    else:
        lines.append(f"{inner}const double v = (double){value};")
        update = {
            "max": "acc = (v > acc || isnan(v)) ? v : acc;",
            "maxabs": "acc = (fabs(v) > acc || isnan(v)) ? fabs(v) : acc;",
            "min": "acc = (v < acc || isnan(v)) ? v : acc;",
            "sum": "acc += v;",
            "sumsq": "acc += v * v;",
        }[k.reduce]
        lines.append(f"{inner}{update}")
    lines.append(f"{indent}}}")
    for a in range(d - 2, -1, -1):
        indent = indent[:-4]
        lines.append(f"{indent}}}")
    if k.scratch:
        lines.append(_copy_back(k))
    if k.reduce:
        lines.append("    return acc;")
    lines.append("}")
    args = [f"({_CTYPE[dt]} *)ptrs[{i}]" for i, dt in enumerate(k.slots)]
    if k.scratch:
        args.append(f"({_CTYPE[k.target_dtype or 'float64']} *)ptrs[{len(k.slots)}]")
    args += [f"b[{a}]" for a in range(d)] + [f"n[{a}]" for a in range(d)] + [f"s[{a}]" for a in range(d)]
    name = "shoal_reduce" if k.reduce else "shoal_kernel"
    lines.append(f"\n{ret} {name}(void **ptrs, const long *b, const long *n, const long *s)\n{{")
    lines.append(f"    {'return ' if k.reduce else ''}body({', '.join(args)});\n}}\n")
    return "\n".join(line for line in lines if line is not None)


def _scaled(offset: int, axis: int, ndim: int) -> str:
    """``offset`` elements along ``axis``; the last axis is contiguous (stride 1)."""
    return f"({offset}L)" if axis == ndim - 1 else f"({offset}L) * s{axis}"


def _copy_back(k: Kernel) -> str:
    """The loop nest that copies the scratch box into the target (aliased statements)."""
    d = k.ndim
    out = []
    indent = "    "
    for a in range(d):
        out.append(f"{indent}for (long i{a} = 0; i{a} < n{a}; ++i{a}) {{")
        indent += "    "
    pos = " + ".join(f"(b{a} + {k.steps[a]}L * i{a})" + (f" * s{a}" if a < d - 1 else "") for a in range(d))
    q = "0"
    for a in range(d):
        q = f"({q}) * n{a} + i{a}"
    out.append(f"{indent}f0[{pos}] = scratch[{q}];")
    for a in range(d):
        indent = indent[:-4]
        out.append(f"{indent}}}")
    return "\n".join(out)


def print_copy(ndim: int, dtype: str) -> str:
    """The C source of the halo copies for ``ndim``-axis arrays of ``dtype``.

    ``void shoal_pack(const T *a, T *buf, const long *b, const long *n, const long *s)``
    copies the box (first index ``b``, count ``n`` per axis, element strides ``s``) of
    ``a`` into the contiguous ``buf``, in C order; ``shoal_unpack`` copies ``buf`` back
    into the box. Faces of inner axes are not contiguous: these replace NumPy's strided
    copies on both sides of a halo exchange. A thin face of the contiguous axis (a few
    points per row) runs its inner loop down the rows instead of along them."""
    t = _CTYPE[dtype]
    d = ndim
    last = d - 1
    out = [f"/* halo pack/unpack: {d} axes, {t} */"]
    for name, const_a, const_buf, pack in (("shoal_pack", "const ", "", True), ("shoal_unpack", "", "const ", False)):
        out.append(f"void {name}({const_a}{t} *restrict a, {const_buf}{t} *restrict buf, "
                   "const long *b, const long *n, const long *s)\n{")
        for a in range(d):
            out.append(f"    const long b{a} = b[{a}], n{a} = n[{a}], s{a} = s[{a}];")
        if d >= 2:
            nxt = d - 2
            out.append(f"    if (n{last} <= 4) {{")
            indent = "        "
            for a in range(d - 2):
                out.append(f"{indent}for (long i{a} = 0; i{a} < n{a}; ++i{a}) {{")
                indent += "    "
            row = " + ".join([f"(b{a} + i{a}) * s{a}" for a in range(d - 2)] + [f"b{nxt} * s{nxt}", f"b{last}"])
            q0 = "0"
            for a in range(d - 2):
                q0 = f"({q0}) * n{a} + i{a}"
            out.append(f"{indent}const long r = {row};")
            out.append(f"{indent}const {t} *restrict from = {'a + r' if pack else f'buf + ({q0}) * n{nxt} * n{last}'};")
            out.append(f"{indent}{t} *restrict to = {f'buf + ({q0}) * n{nxt} * n{last}' if pack else 'a + r'};")
            sf, st = (f"s{nxt}", f"n{last}") if pack else (f"n{last}", f"s{nxt}")
            out.append(f"{indent}for (long k = 0; k < n{last}; ++k) {{")
            out.append(f"{indent}    long j = 0;")
            out.append(f"{indent}    for (; j + 4 <= n{nxt}; j += 4) {{  /* four loads in flight: each is a cache miss */")
            out.append(f"{indent}        const {t} x0 = from[j * {sf} + k], x1 = from[(j + 1) * {sf} + k], "
                       f"x2 = from[(j + 2) * {sf} + k], x3 = from[(j + 3) * {sf} + k];")
            out.append(f"{indent}        to[j * {st} + k] = x0; to[(j + 1) * {st} + k] = x1; "
                       f"to[(j + 2) * {st} + k] = x2; to[(j + 3) * {st} + k] = x3;")
            out.append(f"{indent}    }}")
            out.append(f"{indent}    for (; j < n{nxt}; ++j) to[j * {st} + k] = from[j * {sf} + k];")
            out.append(f"{indent}}}")
            for a in range(d - 3, -1, -1):
                indent = indent[:-4]
                out.append(f"{indent}}}")
            out.append("        return;")
            out.append("    }")
        out.append("    long q = 0;")
        indent = "    "
        for a in range(d - 1):
            out.append(f"{indent}for (long i{a} = 0; i{a} < n{a}; ++i{a}) {{")
            indent += "    "
        row = " + ".join([f"(b{a} + i{a}) * s{a}" for a in range(d - 1)] + [f"b{last}"])
        out.append(f"{indent}const long r = {row};")
        out.append(f"{indent}for (long i{last} = 0; i{last} < n{last}; ++i{last})")
        out.append(f"{indent}    {'buf[q++] = a[r + i%d];' % last if pack else 'a[r + i%d] = buf[q++];' % last}")
        for a in range(d - 2, -1, -1):
            indent = indent[:-4]
            out.append(f"{indent}}}")
        out.append("}")
    return "\n".join(out) + "\n"


def print_wavefront() -> str:
    """The C source of the temporal-blocking driver (one fixed function, any kernels).

    ``long shoal_wavefront(m, d, fns, ptrs, b, n, st, s, lag, band, width, lag1)`` runs
    ``m`` statement kernels (``fns[k]`` with its slot pointers ``ptrs[k]``, its
    tile-local box ``b[k*d:(k+1)*d]``, ``n[...]`` and loop steps ``st[...]``) as a
    wavefront along the outer axis: in each wave, statement ``k`` computes its
    outer-axis layers below ``R - k * lag``, then ``R`` moves on by ``band``. With
    ``lag`` at least the deepest outer-axis offset any statement reads, every layer a
    statement reads was written by the statements before it and not yet overwritten by
    those after it, so each point gets the value of the plain order; the layers of the
    few statements in flight stay in cache.

    ``width`` > 0 (3-D grids whose planes are too big for that) also cuts axis 1 into
    strips of ``width`` rows, run one after the other, each with its own wavefront;
    statement ``k`` takes the strip shifted back by ``k * lag1`` (``lag1``: the deepest
    axis-1 offset read), so by the same argument along axis 1 every row it reads of
    the statements before it is done (in this strip or an earlier one) and none of
    those after it has reached it. Returns the number of kernel calls."""
    return """\
/* temporal blocking: a wavefront of statement kernels along the outer axis (in strips of axis 1) */
typedef void (*shoal_fn)(void **ptrs, const long *b, const long *n, const long *s);

static long ceil_div(long a, long b) { return a >= 0 ? (a + b - 1) / b : -((-a) / b); }

long shoal_wavefront(const long m, const long d, void *const *fns, void *const *ptrs, const long *b,
                     const long *n, const long *st, const long *s, const long lag, const long band,
                     const long width, const long lag1)
{
    long done[m], i0[m], i1[m];
    long lo = b[0], calls = 0, lo1 = 0, hi1 = 0;
    const int strips = width > 0 && d >= 2;
    for (long k = 0; k < m; ++k) {
        if (b[k * d] < lo) lo = b[k * d];
        if (strips) {
            const long first = b[k * d + 1], last = first + st[k * d + 1] * (n[k * d + 1] - 1) + 1;
            if (k == 0 || first < lo1) lo1 = first;
            if (k == 0 || last > hi1) hi1 = last;
        }
    }
    long bb[8], nn[8];
    for (long j = 0;; ++j) {
        /* the strip: axis-1 rows [c0, c1) shifted back by k * lag1 for statement k; the first
           one open below, the last open above */
        const int first = j == 0;
        const int last = !strips || lo1 + (j + 1) * width - (m - 1) * lag1 >= hi1;
        const long c0 = lo1 + j * width, c1 = lo1 + (j + 1) * width;
        int any = 0;
        for (long k = 0; k < m; ++k) {
            done[k] = 0;
            i0[k] = 0;
            i1[k] = strips ? n[k * d + 1] : 0;
            if (strips) {
                const long b1 = b[k * d + 1], s1 = st[k * d + 1];
                if (!first) { long a = ceil_div(c0 - k * lag1 - b1, s1); if (a > i0[k]) i0[k] = a; }
                if (!last) { long a = ceil_div(c1 - k * lag1 - b1, s1); if (a < i1[k]) i1[k] = a; }
                if (i1[k] <= i0[k]) done[k] = n[k * d]; /* nothing of statement k in this strip */
                else any = 1;
            } else any = 1;
        }
        for (long R = lo + band; any; R += band) {
            int finished = 1;
            for (long k = 0; k < m; ++k) {
                const long *bk = b + k * d, *nk = n + k * d;
                const long rk = R - k * lag; /* layers below rk may be computed now */
                long e = rk <= bk[0] ? 0 : ceil_div(rk - bk[0], st[k * d]);
                if (e > nk[0]) e = nk[0];
                if (e > done[k]) {
                    for (long a = 1; a < d; ++a) { bb[a] = bk[a]; nn[a] = nk[a]; }
                    if (strips) { bb[1] = bk[1] + st[k * d + 1] * i0[k]; nn[1] = i1[k] - i0[k]; }
                    bb[0] = bk[0] + st[k * d] * done[k];
                    nn[0] = e - done[k];
                    ((shoal_fn)fns[k])((void **)ptrs[k], bb, nn, s);
                    done[k] = e;
                    ++calls;
                }
                if (done[k] < nk[0]) finished = 0;
            }
            if (finished) break;
        }
        if (last) return calls;
    }
}
"""
