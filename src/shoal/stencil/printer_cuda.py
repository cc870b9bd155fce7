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

Grouped statements are safe in parallel: the grouping rule already forbids a statement
to read, at another point, what the group writes. A statement that reads its target at
another point computes into a scratch box in one launch and copies it back in a second
(the launch boundary is the grid-wide barrier). Reductions combine per-thread values
in shared memory, then per block with an atomic compare-and-swap; ``max``/``min`` are
exact in any order, sums are not (as on the CPU, where tiles add partial sums too).

Exported symbols match the C target's, so the backend calls both alike:
``void shoal_kernel(void **ptrs, const long *b, const long *n, const long *s)``,
``double shoal_reduce(...)``, plus ``const char *shoal_error(void)`` (the last CUDA
error, or NULL). Pointers must be device-accessible (the backend allocates tiles in
managed memory); each call synchronizes before it returns.
"""

from __future__ import annotations

from .lowering import Kernel
from .printer_c import _CTYPE, _Printer

__all__ = ["print_cuda_kernel", "THREADS"]

THREADS = 256  # threads per block

_PRELUDE = """\
#include <math.h>
#include <cuda_runtime.h>
/* NumPy's minimum/maximum: a NaN in either operand wins; on ties the second operand. */
__device__ static inline double shoal_min(double a, double b) { return isnan(a) ? a : (a < b ? a : b); }
__device__ static inline double shoal_max(double a, double b) { return isnan(a) ? a : (a > b ? a : b); }
__device__ static inline float shoal_minf(float a, float b) { return isnan(a) ? a : (a < b ? a : b); }
__device__ static inline float shoal_maxf(float a, float b) { return isnan(a) ? a : (a > b ? a : b); }

struct shoal_box { long b[3]; long n[3]; long s[3]; long total; };

static const char *shoal_last_error = 0;
extern "C" const char *shoal_error(void)
{
    const char *e = shoal_last_error;
    shoal_last_error = 0;
    return e;
}
static void shoal_check(void)
{
    cudaError_t e = cudaGetLastError();
    if (e == cudaSuccess) e = cudaDeviceSynchronize();
    if (e != cudaSuccess) shoal_last_error = cudaGetErrorString(e);
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
"""

_REDUCE = {  # (initial value, per-point value, combine(acc, v))
    "max": ("-INFINITY", "v", "(v > acc || isnan(v)) ? v : acc"),
    "maxabs": ("-INFINITY", "fabs(v)", "(v > acc || isnan(v)) ? v : acc"),
    "min": ("INFINITY", "v", "(v < acc || isnan(v)) ? v : acc"),
    "sum": ("0.0", "v", "acc + v"),
    "sumsq": ("0.0", "v * v", "acc + v"),
}


def _point(k: Kernel, pr: _Printer) -> list[str]:
    """Lines that compute this thread's point: loop indices from the thread number
    ``t`` (C order over the box), the local strides and the element index ``p``."""
    d = k.ndim
    lines = [f"    const long b{a} = x.b[{a}], n{a} = x.n[{a}], s{a} = x.s[{a}];" for a in range(d)]
    lines.append("    long rest = t;")
    for a in range(d - 1, -1, -1):
        lines.append(f"    const long i{a} = rest % n{a};")
        if a:
            lines.append(f"    rest /= n{a};")
    lines.append("    (void)rest;")
    row = " + ".join(f"(b{a} + {k.steps[a]}L * i{a}) * s{a}" for a in range(d - 1))
    last = d - 1
    lines.append(f"    const long p = {row + ' + ' if row else ''}b{last} + {k.steps[last]}L * i{last};")
    return lines


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
    if d > 3:
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
    head = _point(k, pr)  # after the expressions: the shifts they use are known
    shifts = _shifts(pr, d)
    out = [_PRELUDE, f"/* {comment} */" if comment else ""]
    args = [f"({_CTYPE[dt]} *)ptrs[{i}]" for i, dt in enumerate(k.slots)]
    if k.scratch:
        args.append(f"({target_t} *)ptrs[{len(k.slots)}]")
    args.append("x")
    launch = "(unsigned)((x.total + THREADS - 1) / THREADS), THREADS"
    out.append(f"#define THREADS {THREADS}")
    if k.reduce is None:
        out.append(f"__global__ void shoal_body({', '.join(params)})\n{{")
        out.append("    const long t = (long)blockIdx.x * blockDim.x + threadIdx.x;")
        out.append("    if (t >= x.total) return;")
        out += head + shifts
        out.append(f"    {'scratch[t]' if k.scratch else 'f0[p]'} = {value};")
        out += [f"    f{slot}[p] = {text};" for slot, text in stores]
        out.append("}")
        if k.scratch:
            out.append(f"__global__ void shoal_copy_back({target_t} *__restrict__ f0, "
                       f"const {target_t} *__restrict__ scratch, const shoal_box x)\n{{")
            out.append("    const long t = (long)blockIdx.x * blockDim.x + threadIdx.x;")
            out.append("    if (t >= x.total) return;")
            out += _point(k, pr)
            out.append("    f0[p] = scratch[t];")
            out.append("}")
        out.append("extern \"C\" void shoal_kernel(void **ptrs, const long *b, const long *n, const long *s)\n{")
        out.append(f"    const shoal_box x = shoal_make_box({d}, b, n, s);")
        out.append("    if (x.total == 0) return;")
        out.append(f"    shoal_body<<<{launch}>>>({', '.join(args)});")
        if k.scratch:
            out.append(f"    shoal_copy_back<<<{launch}>>>(({target_t} *)ptrs[0], ({target_t} *)ptrs[{len(k.slots)}], x);")
        out.append("    shoal_check();")
        out.append("}")
        return "\n".join(out) + "\n"
    init, per_point, combine = _REDUCE[k.reduce]
    out.append(f"__device__ static inline double shoal_combine(double acc, double v) {{ return {combine}; }}")
    out.append("__device__ static void shoal_atomic(double *out, double v)\n{")
    out.append("    unsigned long long *a = (unsigned long long *)out, old = *a, seen;")
    out.append("    do {")
    out.append("        seen = old;")
    out.append("        const double now = shoal_combine(__longlong_as_double(seen), v);")
    out.append("        old = atomicCAS(a, seen, (unsigned long long)__double_as_longlong(now));")
    out.append("    } while (old != seen);")
    out.append("}")
    out.append(f"__global__ void shoal_body({', '.join(params)}, double *out)\n{{")
    out.append("    __shared__ double part[THREADS];")
    out.append(f"    double acc = {init};")
    out.append("    for (long t = (long)blockIdx.x * blockDim.x + threadIdx.x; t < x.total; t += (long)gridDim.x * blockDim.x) {")
    body = head + shifts
    out += ["    " + line for line in body]
    out.append(f"        double v = (double){value};")
    out.append(f"        v = {per_point};")
    out.append("        acc = shoal_combine(acc, v);")
    out.append("    }")
    out.append("    part[threadIdx.x] = acc;")
    out.append("    __syncthreads();")
    out.append("    for (unsigned w = blockDim.x / 2; w > 0; w /= 2) {")
    out.append("        if (threadIdx.x < w) part[threadIdx.x] = shoal_combine(part[threadIdx.x], part[threadIdx.x + w]);")
    out.append("        __syncthreads();")
    out.append("    }")
    out.append("    if (threadIdx.x == 0) shoal_atomic(out, part[0]);")
    out.append("}")
    out.append("extern \"C\" double shoal_reduce(void **ptrs, const long *b, const long *n, const long *s)\n{")
    out.append(f"    const shoal_box x = shoal_make_box({d}, b, n, s);")
    out.append(f"    double result = {init};")
    out.append("    if (x.total == 0) return result;")
    out.append("    double *out = 0;")
    out.append("    if (cudaMalloc((void **)&out, sizeof(double)) != cudaSuccess) { shoal_check(); return result; }")
    out.append("    cudaMemcpy(out, &result, sizeof(double), cudaMemcpyHostToDevice);")
    out.append("    long blocks = (x.total + THREADS - 1) / THREADS;")
    out.append("    if (blocks > 4096) blocks = 4096;")
    out.append(f"    shoal_body<<<(unsigned)blocks, THREADS>>>({', '.join(args)}, out);")
    out.append("    shoal_check();")
    out.append("    cudaMemcpy(&result, out, sizeof(double), cudaMemcpyDeviceToHost);")
    out.append("    cudaFree(out);")
    out.append("    return result;")
    out.append("}")
    return "\n".join(out) + "\n"
