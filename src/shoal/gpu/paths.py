"""Which device a PE uses and which path its device arrays take: pure decisions, so
``shoal info``, the runtime and the tests reach the same answer from the same facts.

Paths, best first:

* ``mpi``: the MPI library says it is CUDA-aware; device memory goes to MPI as it is.
* ``ipc``: every PE is on one node; the receiver copies device to device out of memory
  the sender exported (CUDA IPC), as UCX's ``cuda_ipc`` transport does.
* ``staged``: through host memory, copied in chunks through pinned buffers.

``SHOAL_GPU_PATH`` forces one (for experiments); a forced path the job cannot take is an
error, never a silent fall-back.
"""

from __future__ import annotations

__all__ = ["PATHS", "choose_path", "choose_device", "parse_devices"]

PATHS = ("mpi", "ipc", "staged")


def choose_path(forced: str, mpi_aware: bool | None, one_node: bool, ipc_supported: bool = True) -> tuple[str, str]:
    """``(path, why)`` for a job; ``forced`` is ``SHOAL_GPU_PATH`` ('' for automatic).

    Raises ValueError naming the reason when ``forced`` names a path this job cannot take."""
    if forced:
        if forced not in PATHS:
            raise ValueError(f"SHOAL_GPU_PATH={forced!r} is not a GPU path; valid: {', '.join(PATHS)} "
                             "(empty: chosen automatically)")
        if forced == "mpi" and not mpi_aware:
            raise ValueError("SHOAL_GPU_PATH=mpi, but the MPI library does not say it is CUDA-aware "
                             f"({'it says no' if mpi_aware is False else 'it cannot be asked'}); "
                             "use ipc or staged")
        if forced == "ipc" and not one_node:
            raise ValueError("SHOAL_GPU_PATH=ipc, but the job's PEs are on more than one node "
                             "(CUDA IPC reaches only processes of one node); use mpi or staged")
        if forced == "ipc" and not ipc_supported:
            raise ValueError("SHOAL_GPU_PATH=ipc, but these devices cannot share memory between processes")
        return forced, "forced by SHOAL_GPU_PATH"
    if mpi_aware:
        return "mpi", "the MPI library is CUDA-aware"
    mpi = "MPI is not CUDA-aware"
    if one_node and ipc_supported:
        return "ipc", f"all PEs on one node; {mpi}"
    if not one_node:
        return "staged", f"PEs on several nodes; {mpi}"
    return "staged", f"the devices cannot share memory between processes; {mpi}"


def parse_devices(spec: str) -> list[int] | None:
    """``SHOAL_DEVICE`` as a list of device numbers; None when empty (by local rank).

    Raises ValueError for anything but comma-separated non-negative integers."""
    spec = spec.strip()
    if not spec:
        return None
    try:
        out = [int(part) for part in spec.split(",")]
    except ValueError:
        out = []
    if not out or min(out) < 0:
        raise ValueError(f"SHOAL_DEVICE={spec!r} is not a device list: give device numbers separated by "
                         "commas, e.g. 0 or 0,1 (PE k of a node takes entry k mod the list's length)")
    return out


def choose_device(local_rank: int, count: int, spec: str = "") -> int:
    """The device a PE uses: ``local_rank`` mod ``count`` by default, else its entry in
    the ``SHOAL_DEVICE`` list (``local_rank`` mod the list's length). Several PEs may
    share one device.

    Raises ValueError when there is no device or the list names one that is not there."""
    if count <= 0:
        raise ValueError("no CUDA device is visible to this process")
    listed = parse_devices(spec)
    if listed is None:
        return local_rank % count
    device = listed[local_rank % len(listed)]
    if device >= count:
        raise ValueError(f"SHOAL_DEVICE={spec!r} names device {device}, but this process sees "
                         f"{count} device{'s' if count != 1 else ''} (0 to {count - 1})")
    return device
