"""Stage 4 (CUDA target): print a lowered :class:`Kernel` as CUDA kernels.

The same lowered program as :mod:`printer_c`, printed for a GPU: one thread per point
of the fused loop nest, each thread evaluating the statement (or every statement of a
group, in order) at its point with the very expression text the C printer prints —
fully parenthesized in NumPy's order, scalars as hexadecimal floats. The build step
compiles with ``--fmad=false`` (no fused multiply-add) and IEEE division and square
root (nvcc's defaults without ``--use_fast_math``), so the arithmetic is NumPy's, bit
for bit. Functions whose CUDA versions are not correctly rounded (``sin``, ``cos``,
besides ``exp`` and ``pow``, which NumPy computes its own way) run with NumPy instead;
:func:`shoal.stencil.analysis.numpy_only_reason` decides that.

Threads map onto the box without integer division: ``x`` runs along the contiguous
last axis (up to :data:`THREADS` threads a block, so a warp reads consecutive
addresses), ``y`` and ``z`` over the axes before it, each thread looping when an axis
is longer than the grid may be (65535 blocks).

Grouped statements are safe in parallel: the grouping rule already forbids a statement
to read, at another point, what the group writes. A statement that reads its target at
another point computes into a scratch box in one launch and copies it back in a second
(the launch boundary is the grid-wide barrier).

Reductions are deterministic: each block combines its threads' values in a fixed tree
and writes one partial; a second launch of one block combines the partials in a fixed
order (the launch shape depends only on the box). ``max``/``min`` give NumPy's value in
any order; sums are not NumPy's pairwise order (as on the CPU, where tiles add partial
sums too), but the same on every run.

Exported symbols (the C target's, plus the stream): ``void shoal_kernel(void **ptrs,
const long *b, const long *n, const long *s, void *stream)``; ``double
shoal_reduce(void **ptrs, const long *b, const long *n, const long *s, void *stream,
double *partials)``, where ``partials`` is device memory for :data:`PARTIALS` + 1
doubles; ``const char *shoal_error(void)``, the last CUDA error or NULL. Pointers are
device memory. A statement's launch returns at once (the caller synchronizes the
stream when it needs the result); a reduction waits for its value.
"""

from __future__ import annotations

from .lowering import Kernel
from .printer_c import _CTYPE, _Printer

__all__ = ["print_cuda_kernel", "THREADS", "PARTIALS"]

THREADS = 256  # most threads per block, along the contiguous axis
#: most blocks of a reduction's first launch (16 along x, 256 along y, 16 along z): the
#: length of its partials buffer, in doubles, before the slot of the result
PARTIALS = 16 * 256 * 16

_PRELUDE = """\
#include <math.h>
#include <cuda_runtime.h>
/* NumPy's minimum/maximum: a NaN in either operand wins; on ties the second operand. */
__device__ static inline double shoal_min(double a, double b) { return isnan(a) ? a : (a < b ? a : b); }
__device__ static inline double shoal_max(double a, double b) { return isnan(a) ? a : (a > b ? a : b); }
__device__ static inline float shoal_minf(float a, float b) { return isnan(a) ? a : (a < b ? a : b); }
__device__ static inline float shoal_maxf(float a, float b) { return isnan(a) ? a : (a > b ? a : b); }

#define SHOAL_THREADS %(threads)d
#define SHOAL_PARTIALS %(partials)d
/* a box of up to 3 axes; axes past the kernel's are 1 long */
struct shoal_box { long b[3]; long n[3]; long s[3]; long total; };

static const char *shoal_last_error = 0;
extern "C" const char *shoal_error(void)
{
    const char *e = shoal_last_error;
    shoal_last_error = 0;
    return e;
}
static void shoal_note(cudaError_t e)
{
    if (e != cudaSuccess && !shoal_last_error) shoal_last_error = cudaGetErrorString(e);
}
static shoal_box shoal_make_box(int d, const long *b, const long *n, const long *s)
{
    shoal_box x;
    x.total = 1;
    for (int a = 0; a < 3; ++a) {
        x.b[a] = a < d ? b[a] : 0;
        x.n[a] = a < d ? n[a] : 1;
        x.s[a] = a < d ? s[a] : 0;
        x.total *= x.n[a];
    }
    return x;
}
static long shoal_least(long a, long b) { return a < b ? a : b; }
/* threads along the contiguous axis: whole warps, at most SHOAL_THREADS */
static dim3 shoal_block(long last)
{
    return dim3((unsigned)(last >= SHOAL_THREADS ? SHOAL_THREADS : (last + 31) / 32 * 32));
}
/* blocks: x covers the contiguous axis, y and z the two before it (threads loop past 65535) */
static dim3 shoal_grid(const shoal_box &x, int d, unsigned threads)
{
    const long gx = (x.n[d - 1] + threads - 1) / threads;
    const long gy = d >= 2 ? shoal_least(x.n[d - 2], 65535) : 1;
    const long gz = d >= 3 ? shoal_least(x.n[d - 3], 65535) : 1;
    return dim3((unsigned)gx, (unsigned)gy, (unsigned)gz);
}
"""

_REDUCE = {  # (initial value, per-point value, combine(acc, v))
    "max": ("-INFINITY", "v", "(v > acc || isnan(v)) ? v : acc"),
    "maxabs": ("-INFINITY", "fabs(v)", "(v > acc || isnan(v)) ? v : acc"),
    "min": ("INFINITY", "v", "(v < acc || isnan(v)) ? v : acc"),
    "sum": ("0.0", "v", "acc + v"),
    "sumsq": ("0.0", "v * v", "acc + v"),
}


def _axes(d: int) -> list[str]:
    """The local copies of the box's first index, count and stride per axis."""
    return [f"    const long b{a} = x.b[{a}], n{a} = x.n[{a}], s{a} = x.s[{a}];" for a in range(d)]


def _loops(d: int, reduce: bool) -> tuple[list[str], str]:
    """The loops that give this thread its points: ``(opening lines, indent inside)``.
    Axis ``d-1`` from ``x`` (every thread one point, or striding for a reduction),
    ``d-2`` from ``y`` and ``d-3`` from ``z``, striding by the grid."""
    last = d - 1
    lines = []
    indent = "    "
    for a, dim in ((d - 3, "z"), (d - 2, "y")):
        if a >= 0:
            lines.append(f"{indent}for (long i{a} = blockIdx.{dim}; i{a} < n{a}; i{a} += gridDim.{dim}) {{")
            indent += "    "
    first = "(long)blockIdx.x * blockDim.x + threadIdx.x"
    if reduce:
        lines.append(f"{indent}for (long i{last} = {first}; i{last} < n{last}; "
                     f"i{last} += (long)gridDim.x * blockDim.x) {{")
    else:
        lines.insert(0, f"    const long i{last} = {first};")
        lines.insert(1, f"    if (i{last} >= n{last}) return;")
        lines.append(f"{indent}{{")
    return lines, indent + "    "


def _closing(d: int) -> list[str]:
    out = []
    indent = "    " * (1 + max(0, d - 1))
    for _ in range(max(0, d - 1) + 1):
        out.append(f"{indent}}}")
        indent = indent[:-4]
    return out


def _position(k: Kernel, indent: str) -> list[str]:
    """``p``, the element index of this thread's point in the tile's arrays, and ``q``,
    its index in C order over the box (the scratch box's)."""
    d = k.ndim
    terms = [f"(b{a} + {k.steps[a]}L * i{a}) * s{a}" for a in range(d - 1)] + [f"b{d - 1} + {k.steps[d - 1]}L * i{d - 1}"]
    out = [f"{indent}const long p = {' + '.join(terms)};"]
    q = "i0"
    for a in range(1, d):
        q = f"({q}) * n{a} + i{a}"
    out.append(f"{indent}const long q = {q};")
    out.append(f"{indent}(void)q;")
    return out


def _shifts(pr: _Printer, d: int) -> list[str]:
    out = []
    for offs, name in pr.consts.items():
        terms = [f"({o}L)" if a == d - 1 else f"({o}L) * s{a}" for a, o in enumerate(offs) if o]
        out.append(f"    const long {name} = {' + '.join(terms)};")
    return out


def print_cuda_kernel(k: Kernel, comment: str = "") -> str:
    """The CUDA source of kernel ``k`` (device kernels plus the host-side entry point)."""
    pr = _Printer(k)
    d = k.ndim
    if not 1 <= d <= 3:
        raise ValueError("the CUDA printer handles 1 to 3 axes")
    value = pr.expr(k.body)
    stores = [(slot, pr.expr(e)) for slot, _, e in k.more]
    written = {0} if k.reduce is None else set()
    written.update(slot for slot, _, _ in k.more)
    params = [f"{'' if i in written else 'const '}{_CTYPE[dt]} *__restrict__ f{i}" for i, dt in enumerate(k.slots)]
    target_t = _CTYPE[k.target_dtype or "float64"]
    if k.scratch:
        params.append(f"{target_t} *__restrict__ scratch")
    params.append("const shoal_box x")
    out = [_PRELUDE % {"threads": THREADS, "partials": PARTIALS}, f"/* {comment} */" if comment else ""]
    args = [f"({_CTYPE[dt]} *)ptrs[{i}]" for i, dt in enumerate(k.slots)]
    if k.scratch:
        args.append(f"({target_t} *)ptrs[{len(k.slots)}]")
    args.append("x")
    shifts = _shifts(pr, d)  # after the expressions: the shifts they use are known
    if k.reduce is None:
        loops, inner = _loops(d, False)
        out.append(f"__global__ void shoal_body({', '.join(params)})\n{{")
        out += _axes(d) + shifts + loops + _position(k, inner)
        out.append(f"{inner}{'scratch[q]' if k.scratch else 'f0[p]'} = {value};")
        out += [f"{inner}f{slot}[p] = {text};" for slot, text in stores]
        out += _closing(d)
        out.append("}")
        if k.scratch:
            out.append(f"__global__ void shoal_copy_back({target_t} *__restrict__ f0, "
                       f"const {target_t} *__restrict__ scratch, const shoal_box x)\n{{")
            out += _axes(d) + loops + _position(k, inner)
            out.append(f"{inner}f0[p] = scratch[q];")
            out += _closing(d)
            out.append("}")
        out.append("extern \"C\" void shoal_kernel(void **ptrs, const long *b, const long *n, const long *s, "
                   "void *stream)\n{")
        out.append(f"    const shoal_box x = shoal_make_box({d}, b, n, s);")
        out.append("    if (x.total == 0) return;")
        out.append("    cudaStream_t st = (cudaStream_t)stream;")
        out.append("    (void)cudaGetLastError();  /* an error another library left behind is not this launch's */")
        out.append(f"    const dim3 block = shoal_block(x.n[{d - 1}]);")
        out.append(f"    const dim3 grid = shoal_grid(x, {d}, block.x);")
        out.append(f"    shoal_body<<<grid, block, 0, st>>>({', '.join(args)});")
        if k.scratch:
            out.append(f"    shoal_copy_back<<<grid, block, 0, st>>>(({target_t} *)ptrs[0], "
                       f"({target_t} *)ptrs[{len(k.slots)}], x);")
        out.append("    shoal_note(cudaGetLastError());")
        out.append("}")
        return "\n".join(out) + "\n"
    init, per_point, combine = _REDUCE[k.reduce]
    loops, inner = _loops(d, True)
    out.append(f"__device__ static inline double shoal_combine(double acc, double v) {{ return {combine}; }}")
    out.append("/* the block's threads' values combined in a fixed tree, into *out */")
    out.append("__device__ static void shoal_block_total(double acc, double *out)\n{")
    out.append("    __shared__ double part[SHOAL_THREADS];")
    out.append("    part[threadIdx.x] = acc;")
    out.append("    __syncthreads();")
    out.append("    for (unsigned w = SHOAL_THREADS / 2; w > 0; w /= 2) {")
    out.append("        if (threadIdx.x < w) part[threadIdx.x] = shoal_combine(part[threadIdx.x], part[threadIdx.x + w]);")
    out.append("        __syncthreads();")
    out.append("    }")
    out.append("    if (threadIdx.x == 0) *out = part[0];")
    out.append("}")
    out.append(f"__global__ void shoal_body({', '.join(params)}, double *partials)\n{{")
    out.append(f"    double acc = {init};")
    out += _axes(d) + shifts + loops
    out += _position(k, inner)[:1]
    out.append(f"{inner}double v = (double){value};")
    out.append(f"{inner}v = {per_point};")
    out.append(f"{inner}acc = shoal_combine(acc, v);")
    out += _closing(d)
    out.append("    shoal_block_total(acc, partials + (blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x);")
    out.append("}")
    out.append("/* the partials, in a fixed order, into partials[SHOAL_PARTIALS] (one block) */")
    out.append("__global__ void shoal_finish(double *partials, const long count)\n{")
    out.append(f"    double acc = {init};")
    out.append("    for (long i = threadIdx.x; i < count; i += SHOAL_THREADS) acc = shoal_combine(acc, partials[i]);")
    out.append("    shoal_block_total(acc, partials + SHOAL_PARTIALS);")
    out.append("}")
    out.append("extern \"C\" double shoal_reduce(void **ptrs, const long *b, const long *n, const long *s, "
               "void *stream, double *partials)\n{")
    out.append(f"    const shoal_box x = shoal_make_box({d}, b, n, s);")
    out.append(f"    double result = {init};")
    out.append("    if (x.total == 0) return result;")
    out.append("    cudaStream_t st = (cudaStream_t)stream;")
    out.append("    (void)cudaGetLastError();")
    out.append(f"    const long gx = shoal_least((x.n[{d - 1}] + SHOAL_THREADS - 1) / SHOAL_THREADS, 16);")
    out.append(f"    const long gy = {'shoal_least(x.n[%d], 256)' % (d - 2) if d >= 2 else '1'};")
    out.append(f"    const long gz = {'shoal_least(x.n[%d], 16)' % (d - 3) if d >= 3 else '1'};")
    out.append("    shoal_body<<<dim3((unsigned)gx, (unsigned)gy, (unsigned)gz), SHOAL_THREADS, 0, st>>>"
               f"({', '.join(args)}, partials);")
    out.append("    shoal_finish<<<1, SHOAL_THREADS, 0, st>>>(partials, gx * gy * gz);")
    out.append("    cudaError_t e = cudaGetLastError();")
    out.append("    if (e == cudaSuccess) e = cudaMemcpyAsync(&result, partials + SHOAL_PARTIALS, sizeof(double), "
               "cudaMemcpyDeviceToHost, st);")
    out.append("    if (e == cudaSuccess) e = cudaStreamSynchronize(st);")
    out.append("    shoal_note(e);")
    out.append("    return result;")
    out.append("}")
    return "\n".join(out) + "\n"
