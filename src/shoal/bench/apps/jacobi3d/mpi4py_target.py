"""``--target mpi4py``: jacobi3d in mpi4py (4.x), one block of the grid per rank.

The ranks form a ``q1 x q2 x q3`` Cartesian communicator (``comm.Create_cart``, not
periodic, not reordered); rank ``r`` owns block ``cart.Get_coords(r)``. Every step each
rank copies its six interior faces (strided views of its block) into contiguous
buffers, exchanges them with its neighbours with non-blocking ``Isend``/``Irecv``
(``MPI.PROC_NULL`` at the physical boundary, where the ghosts stay zero) and
``Waitall``, copies the received faces into its ghost layers, and runs the kernel.
Before the timed steps every rank compiles the kernel and the ranks meet at a barrier.
Per rank the time in the kernel is "compute", the rest (packing, messages, waiting,
unpacking) "communication".

With ``--device cuda`` the block and the face buffers are CuPy arrays on GPU ``local
rank mod GPUs`` (the rank's number among the ranks of its node). ``--staging host``
copies each packed face into a page-locked host buffer, sends that, and copies the
received one back to the GPU before unpacking it; ``--staging direct`` hands the device
buffers to MPI, which only a CUDA-aware MPI library can take: the run asks the library
(:func:`cuda_awareness`) and stops, exit code 2, with the answer when it is not. The
device is synchronised before MPI reads what a kernel wrote, and after each sweep, so
compute is the kernel's time on the device.
"""

from __future__ import annotations

import ctypes
import sys
import time
from typing import Any, NamedTuple

from .app import Config, layout, make_report, shape_text
from .arrays import BlockArrays, arrays_for
from .kernels import exact_sum, face, initial_block, to_float

__all__ = ["run", "cuda_awareness", "direct_refusal"]

#: MPICH's mpi.h: MPIX_GPU_query_support's code for CUDA
_MPIX_GPU_SUPPORT_CUDA = 0


class _Side(NamedTuple):
    """One neighbour of a rank's block."""

    peer: int  # its rank
    axis: int
    high: bool  # the neighbour above along ``axis`` (else below)
    pack: Any  # contiguous copy (on the block's device) of the interior layer it gets
    land: Any  # contiguous array (on the block's device) its layer is unpacked from
    send: Any  # what MPI sends: ``pack``, or its host copy
    recv: Any  # where MPI receives: ``land``, or a host buffer copied into it
    layer: int  # index along ``axis`` of the interior layer sent
    ghost: int  # index along ``axis`` of the ghost layer filled


def _tag(axis: int, high: bool) -> int:
    """The tag of a face as its receiver sees it: which ghost layer (axis, low/high) it fills."""
    return 30 + 2 * axis + int(high)


def cuda_awareness(MPI: Any) -> tuple[bool | None, str]:
    """Whether the MPI library under mpi4py says it sends from and receives into CUDA
    device memory (MPI initialised): ``(answer, the query asked)``, answer None when it
    has no query. mpi4py's own ``MPI.Query_cuda_support`` where it has one, else the
    library's MPIX query looked up through mpi4py's extension module (the dynamic
    linker searches the libraries it links, the MPI library among them)."""
    query = getattr(MPI, "Query_cuda_support", None)
    if query is not None:
        return bool(query()), "MPI.Query_cuda_support()"
    try:
        lib = ctypes.CDLL(MPI.__file__)
    except OSError as exc:
        return None, f"the MPI library could not be opened to ask it ({exc})"
    gpu_query = getattr(lib, "MPIX_GPU_query_support", None)  # MPICH >= 4
    if gpu_query is not None:
        flag = ctypes.c_int(0)
        gpu_query.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_int)]
        gpu_query.restype = ctypes.c_int
        if gpu_query(_MPIX_GPU_SUPPORT_CUDA, ctypes.byref(flag)) == 0:
            return bool(flag.value), "MPIX_GPU_query_support(MPIX_GPU_SUPPORT_CUDA)"
    cuda_query = getattr(lib, "MPIX_Query_cuda_support", None)  # Open MPI (and MPICH)
    if cuda_query is not None:
        cuda_query.argtypes = []
        cuda_query.restype = ctypes.c_int
        return bool(cuda_query()), "MPIX_Query_cuda_support()"
    return None, "neither MPIX_GPU_query_support nor MPIX_Query_cuda_support is in the library"


def direct_refusal(aware: bool | None, how: str, library: str) -> str | None:
    """Why ``--staging direct`` cannot hand device buffers to MPI ``library``, or None when it can."""
    if aware:
        return None
    said = (f"says it is not CUDA-aware ({how})" if aware is False
            else f"cannot be asked whether it is CUDA-aware ({how})")
    return (f"--target mpi4py --staging direct hands GPU buffers to MPI, which needs a CUDA-aware MPI library; "
            f"{library} {said}. Use --staging host, or an MPI built with CUDA support")


def _device_number(world: Any, MPI: Any, arrays: type[BlockArrays]) -> int:
    """This rank's GPU: its rank among the ranks of its node, modulo the GPUs it sees."""
    if not arrays.gpu:
        return 0
    node = world.Split_type(MPI.COMM_TYPE_SHARED)
    local = node.Get_rank()
    node.Free()
    return local % arrays.count()


def _simulate(cfg: Config, cart: Any, MPI: Any, dev: BlockArrays) -> tuple[float, float, int]:
    """This rank's part: (elapsed, compute seconds, exact sum of its final block)."""
    grid, _, _ = layout(cfg)
    bounds = grid.bounds(cart.Get_coords(cart.Get_rank()))
    u = dev.put(initial_block(cfg.shape, bounds))
    v = u.copy()
    staged = cfg.staging == "host"
    sides: list[_Side] = []
    for axis in range(3):
        n = bounds[axis][1] - bounds[axis][0]
        for peer, high in zip(cart.Shift(axis, 1), (False, True)):
            if peer != MPI.PROC_NULL:
                shape = face(u, axis, 0).shape
                pack, land = dev.empty(shape), dev.empty(shape)
                send, recv = ((dev.staging_buffer(shape), dev.staging_buffer(shape)) if staged
                              else (dev.message(pack), dev.message(land)))
                sides.append(_Side(peer, axis, high, pack, land, send, recv, n if high else 1, n + 1 if high else 0))
    waitall = MPI.Request.Waitall
    dev.warm()
    dev.sync()
    cart.Barrier()
    compute = 0.0
    started = time.perf_counter()
    for _ in range(cfg.steps):
        reqs = [cart.Irecv(s.recv, source=s.peer, tag=_tag(s.axis, s.high)) for s in sides]
        for s in sides:
            s.pack[...] = face(u, s.axis, s.layer)
            if staged:
                dev.to_host(s.pack, s.send)
        dev.sync()  # MPI reads the packed faces (or their host copies) outside the device's stream
        reqs += [cart.Isend(s.send, dest=s.peer, tag=_tag(s.axis, not s.high)) for s in sides]
        waitall(reqs)
        for s in sides:
            if staged:
                dev.to_device(s.recv, s.land)
            face(u, s.axis, s.ghost)[...] = s.land
        dev.sync()  # the unpacking is communication: done before the kernel's clock starts
        t0 = time.perf_counter()
        dev.step(u, v)
        dev.sync()
        compute += time.perf_counter() - t0
        u, v = v, u
    elapsed = time.perf_counter() - started
    return elapsed, compute, exact_sum(dev.get(u[1:-1, 1:-1, 1:-1]))


def run(cfg: Config, arrays: type[BlockArrays] | None = None) -> int:
    """Every rank: run the app; rank 0 prints the report. Returns the exit code.

    ``arrays`` (default: ``cfg.device``'s) is where the blocks live; the tests pass a
    host-memory class that takes the device code path."""
    from mpi4py import MPI

    arrays = arrays or arrays_for(cfg.device)
    world = MPI.COMM_WORLD
    cfg = cfg.with_pes(world.Get_size())
    if cfg.staging == "direct" and arrays.needs_aware_mpi:
        aware, how = cuda_awareness(MPI)
        why = direct_refusal(aware, how, " ".join(MPI.Get_library_version().splitlines()[0].split()))
        if why is not None:  # every rank got the same answer: all stop
            if world.Get_rank() == 0:
                print(f"shoal bench app jacobi3d: {why}", file=sys.stderr, flush=True)
            return 2
    grid, _, q = layout(cfg)
    dev = arrays(_device_number(world, MPI, arrays))
    cart = world.Create_cart(list(q), periods=[False] * 3, reorder=False)
    elapsed, compute, mine = _simulate(cfg, cart, MPI, dev)
    slowest = cart.reduce(elapsed, op=MPI.MAX, root=0)
    rows = cart.gather((compute, mine), root=0)
    code = 0
    if cart.Get_rank() == 0:
        assert rows is not None and slowest is not None
        checksum = to_float(sum(r[1] for r in rows))
        report = make_report(cfg, cart.Get_size(), slowest, [r[0] for r in rows], checksum,
                             f"{shape_text(q)} Cartesian grid of ranks ({grid.describe()})",
                             extra={"blocks": grid.blocks, "halo_buffers": "contiguous"}, arrays=arrays)
        report.emit(cfg.json)
        code = report.exit_code
    code = cart.bcast(code, root=0)
    cart.Free()
    return code
