"""The floor of shoal's two GPU paths on this machine, without shoal: a ping-pong of two
processes (``mpiexec -n 2 python3 .ci/gpu_transfer_floor.py``) doing by hand what each path
does per message, timed like OSU's latency (half a round trip).

* ipc: the sender copies its array into a buffer it exported once (CUDA IPC), waits for the
  copy, and sends an 8-byte token over MPI; the receiver copies out of the buffer it opened
  once, and waits for its copy. (shoal also acks each lent buffer; that is left out.)
* staged: device to pinned host memory, MPI Send/Recv of the bytes, host to device.

If these figures are as high as shoal's, the cost is the machine's (two processes
time-slicing one GPU, say), not shoal's; run it under MPS too (.ci/gpu-check mps).
"""

import ctypes
import time

import cupy
import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
rank, peer = comm.Get_rank(), 1 - comm.Get_rank()
cupy.cuda.Device(0).use()
stream = cupy.cuda.Stream(non_blocking=True)


def ipc_round_trips(n: int, iters: int) -> float:
    """Seconds per ping-pong of ``n`` bytes over CUDA IPC buffers exported once."""
    src = cupy.full(n, rank + 1, cupy.uint8)
    dst = cupy.empty(n, cupy.uint8)
    mine = cupy.cuda.Memory(n)  # cudaMalloc of its own: a base pointer IPC can export
    exported = cupy.cuda.MemoryPointer(mine, 0)
    handle = comm.sendrecv(bytes(cupy.cuda.runtime.ipcGetMemHandle(mine.ptr)), peer, source=peer)
    theirs = cupy.cuda.MemoryPointer(cupy.cuda.UnownedMemory(cupy.cuda.runtime.ipcOpenMemHandle(handle), n, None), 0)
    token = np.zeros(1, np.int64)

    def send() -> None:
        exported.copy_from_device_async(src.data, n, stream)
        stream.synchronize()
        comm.Send(token, peer)

    def receive() -> None:
        comm.Recv(token, peer)
        dst.data.copy_from_device_async(theirs, n, stream)
        stream.synchronize()

    elapsed = _ping_pong(send, receive, iters)
    assert int(dst[0]) == peer + 1 and int(dst[-1]) == peer + 1, "the bytes did not arrive"
    comm.Barrier()
    cupy.cuda.runtime.ipcCloseMemHandle(theirs.ptr)
    return elapsed


def staged_round_trips(n: int, iters: int) -> float:
    """Seconds per ping-pong of ``n`` bytes staged through pinned host memory."""
    src = cupy.full(n, rank + 1, cupy.uint8)
    dst = cupy.empty(n, cupy.uint8)
    out = np.frombuffer(cupy.cuda.alloc_pinned_memory(n), np.uint8, n)
    into = np.frombuffer(cupy.cuda.alloc_pinned_memory(n), np.uint8, n)

    def send() -> None:
        src.data.copy_to_host_async(ctypes.c_void_p(out.ctypes.data), n, stream)
        stream.synchronize()
        comm.Send(out, peer)

    def receive() -> None:
        comm.Recv(into, peer)
        dst.data.copy_from_host_async(ctypes.c_void_p(into.ctypes.data), n, stream)
        stream.synchronize()

    elapsed = _ping_pong(send, receive, iters)
    assert int(dst[0]) == peer + 1 and int(dst[-1]) == peer + 1, "the bytes did not arrive"
    return elapsed


def _ping_pong(send, receive, iters: int) -> float:
    for _ in range(5):  # warm-up
        send() if rank == 0 else receive()
        receive() if rank == 0 else send()
    comm.Barrier()
    t0 = time.perf_counter()
    for _ in range(iters):
        if rank == 0:
            send()
            receive()
        else:
            receive()
            send()
    return (time.perf_counter() - t0) / iters


if rank == 0:
    print("# the per-message floor of each path, no shoal: half a ping-pong (us), and MB/s at that rate")
    print(f"{'bytes':>10} {'ipc us':>10} {'ipc MB/s':>12} {'staged us':>10} {'staged MB/s':>12}")
for n in (8, 4096, 1 << 20, 4 << 20, 16 << 20, 64 << 20):
    iters = 200 if n <= (4 << 20) else 40
    ipc, staged = ipc_round_trips(n, iters) / 2, staged_round_trips(n, iters) / 2
    if rank == 0:
        print(f"{n:>10} {ipc * 1e6:>10.1f} {n / ipc / 1e6:>12.0f} {staged * 1e6:>10.1f} {n / staged / 1e6:>12.0f}",
              flush=True)
