"""Run the device code of a generated CUDA kernel on the CPU, one thread after another.

The CUDA printer's kernels compute each point from ``blockIdx``/``threadIdx`` and loop
over the grid; that mapping (and the scratch copy-back, statement groups, the
reductions' strided loops and the layout of their partials) is what this checks on a
machine without a GPU. The kernel's source is compiled as C++ by the host compiler with
a small shim (``dim3``, the thread indices as globals, CUDA's qualifiers as nothing)
and ``-ffp-contract=off``; an ``emulate`` function stands in for the launch, running
every block and thread in turn. A reduction's in-block tree (``__shared__`` memory and
``__syncthreads``) cannot run one thread at a time: the emulation keeps each thread's
value and combines them in the same fixed tree after the block, and combines the
blocks' partials as ``shoal_finish`` does. ``cap`` shrinks the grid (its y and z,
and a reduction's x), so threads must loop to cover the box.

Not a GPU: what this cannot show is anything of the hardware (memory, streams, the
CUDA math library); tests/stencil/test_stencil_cuda.py runs the real kernels on one.
"""

from __future__ import annotations

import ctypes
import re
from typing import Any

from shoal.stencil.build import compile_kernel

__all__ = ["emulated"]

SHIM = r"""
#include <math.h>
struct dim3 {
    unsigned x, y, z;
    dim3(unsigned a = 1, unsigned b = 1, unsigned c = 1) : x(a), y(b), z(c) {}
};
static dim3 blockIdx, threadIdx, gridDim, blockDim;
typedef int cudaError_t;
typedef void *cudaStream_t;
#define cudaSuccess 0
static const char *cudaGetErrorString(cudaError_t) { return "emulated"; }
#define __global__
#define __device__
#define __restrict__
#define __shared__ static
#define __syncthreads()
"""


def _launch_args(source: str, kernel: str) -> str:
    found = re.search(kernel + r"<<<[^>]*>>>\((.*)\);", source)
    assert found, f"no launch of {kernel} in the source"
    return found.group(1)


def _statement(device: str, host: str, d: int) -> str:
    copy_back = "shoal_copy_back" in host
    loops = """
    for (unsigned bz = 0; bz < grid.z; ++bz)
        for (unsigned by = 0; by < grid.y; ++by)
            for (unsigned bx = 0; bx < grid.x; ++bx)
                for (unsigned tx = 0; tx < block.x; ++tx) {
                    blockIdx = dim3(bx, by, bz);
                    threadIdx = dim3(tx);
                    %s;
                }
"""
    out = [device, "extern \"C\" void emulate(void **ptrs, const long *b, const long *n, const long *s, unsigned cap)\n{",
           f"    const shoal_box x = shoal_make_box({d}, b, n, s);",
           "    if (x.total == 0) return;",
           f"    const dim3 block = shoal_block(x.n[{d - 1}]);",
           f"    dim3 grid = shoal_grid(x, {d}, block.x);",
           "    if (cap && grid.y > cap) grid.y = cap;",
           "    if (cap && grid.z > cap) grid.z = cap;",
           "    blockDim = block;",
           "    gridDim = grid;",
           loops % f"shoal_body({_launch_args(host, 'shoal_body')})"]
    if copy_back:
        out.append(loops % f"shoal_copy_back({_launch_args(host, 'shoal_copy_back')})")
    out.append("}")
    return "\n".join(out)


def _reduction(device: str, host: str, d: int) -> str:
    init = re.search(r"double result = (.*);", host).group(1)  # type: ignore[union-attr]
    sizes = [re.search(rf"const long {g} = (.*);", host).group(1) for g in ("gx", "gy", "gz")]  # type: ignore[union-attr]
    device = device.replace("__device__ static void shoal_block_total(", "__device__ static void shoal_block_total_gpu(")
    keep = ("static double emu_acc[SHOAL_THREADS];\n"
            "static void shoal_block_total(double acc, double *partials) { emu_acc[threadIdx.x] = acc; (void)partials; }\n")
    at = device.index("\n", device.index("shoal_combine(double acc, double v)")) + 1
    device = device[:at] + keep + device[at:]
    tree = """
    for (unsigned w = SHOAL_THREADS / 2; w > 0; w /= 2)
        for (unsigned t = 0; t < w; ++t) emu_acc[t] = shoal_combine(emu_acc[t], emu_acc[t + w]);"""
    return "\n".join([
        device,
        "static double emu_partials[SHOAL_PARTIALS + 1];",
        "extern \"C\" double emulate(void **ptrs, const long *b, const long *n, const long *s, unsigned cap)\n{",
        f"    const shoal_box x = shoal_make_box({d}, b, n, s);",
        f"    double result = {init};",
        "    if (x.total == 0) return result;",
        *(f"    long {g} = {size};\n    if (cap && {g} > (long)cap) {g} = cap;" for g, size in zip(("gx", "gy", "gz"), sizes)),
        "    double *partials = emu_partials;",
        "    blockDim = dim3(SHOAL_THREADS);",
        "    gridDim = dim3((unsigned)gx, (unsigned)gy, (unsigned)gz);",
        "    for (long bz = 0; bz < gz; ++bz)",
        "        for (long by = 0; by < gy; ++by)",
        "            for (long bx = 0; bx < gx; ++bx) {",
        "                blockIdx = dim3((unsigned)bx, (unsigned)by, (unsigned)bz);",
        "                for (unsigned tx = 0; tx < SHOAL_THREADS; ++tx) {",
        "                    threadIdx = dim3(tx);",
        f"                    shoal_body({_launch_args(host, 'shoal_body')});",
        "                }",
        tree,
        "                partials[(bz * gy + by) * gx + bx] = emu_acc[0];",
        "            }",
        "    for (unsigned t = 0; t < SHOAL_THREADS; ++t) {",
        f"        double acc = {init};",
        "        for (long i = t; i < gx * gy * gz; i += SHOAL_THREADS) acc = shoal_combine(acc, partials[i]);",
        "        emu_acc[t] = acc;",
        "    }",
        tree,
        "    return emu_acc[0];",
        "}",
    ])


def emulated(cuda_source: str, ndim: int, reduce: bool) -> Any:
    """``emulate(ptrs, b, n, s, cap)``: the kernel of ``cuda_source`` (printed for
    ``ndim`` axes) run on the CPU; a reduction's returns its value."""
    cut = cuda_source.index('extern "C" double shoal_reduce' if reduce else 'extern "C" void shoal_kernel')
    device, host = cuda_source[:cut], cuda_source[cut:]
    device = SHIM + device.replace("#include <cuda_runtime.h>\n", "")
    text = _reduction(device, host, ndim) if reduce else _statement(device, host, ndim)
    path = compile_kernel(text, extra_flags=("-x", "c++", "-std=c++17", "-fno-exceptions"))
    fn = ctypes.CDLL(str(path)).emulate
    long_p = ctypes.POINTER(ctypes.c_long)
    fn.argtypes = [ctypes.POINTER(ctypes.c_void_p), long_p, long_p, long_p, ctypes.c_uint]
    fn.restype = ctypes.c_double if reduce else None
    return fn
