"""The MPI library under the transport and the job it runs: what ``shoal info`` reports
of it (library, ABI, thread level, CUDA awareness, the compiled path), the checks and
settings made when the transport starts, and ending or finishing the whole job."""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False  # typing is for type checkers: a PE's start-up skips its import
if TYPE_CHECKING:
    from typing import Any

from mpi4py import MPI

__all__ = ["job_finished", "abort_world", "exchange_ring", "describe_library", "cuda_aware"]

#: set once a job's closing barrier passed on every PE (MPITransport.close)
finished: list[bool] = []


def job_finished() -> bool:
    """Whether a job on this transport ended on every PE (its closing barrier passed)."""
    return bool(finished)


def abort_world(code: int) -> None:
    """End every process of the MPI job with exit code ``code`` (``MPI_Abort``), starting MPI
    first if needed: PEs still in ``MPI_Init`` wait there for this one otherwise.

    Every caller has written its report by now. The MPI library's own line about the
    abort (MPICH: ``Abort(1) on node 0 (rank 0 in comm 0): application called
    MPI_Abort(...)``) would follow it and be the last thing the user reads, naming an
    MPI call the program never made, so this process's stderr goes to /dev/null first
    (``SHOAL_DEBUG=1`` keeps it)."""
    if os.environ.get("SHOAL_DEBUG", "") in ("", "0"):
        try:
            sys.stderr.flush()
            null = os.open(os.devnull, os.O_WRONLY)
            os.dup2(null, 2)
        except OSError:  # no /dev/null, a closed stderr: the line is printed, nothing else changes
            pass
    MPI.COMM_WORLD.Abort(code)


def exchange_ring(value: Any) -> Any:
    """Send ``value`` to the previous PE and return the next PE's (every PE calls it, at start-up)."""
    world = MPI.COMM_WORLD
    rank, size = world.Get_rank(), world.Get_size()
    return world.sendrecv(value, dest=(rank - 1) % size, source=(rank + 1) % size)


def describe_library() -> dict[str, Any]:
    """The MPI library behind this transport and the compiled path, as measured here, for ``shoal info``."""
    import mpi4py

    return {
        "mpi4py": mpi4py.__version__,
        "mpi library": MPI.Get_library_version().strip().splitlines()[0],
        "mpi standard": "%d.%d" % MPI.Get_version(),
        "mpi abi": _abi_name(),
        "mpi thread level": _thread_level(),
        "compiled path": _native_status(),
        "cuda-aware mpi": cuda_aware(),
    }


def reuse_heap(limit: int) -> None:
    """Ask glibc to serve allocations below ``limit`` bytes (at most 32 MiB) from its heap
    and to keep up to 4x that freed, instead of mapping fresh pages for each large
    block: every large message is received into new memory, and first-touch page faults
    cost as much as the copy itself. Other C libraries have no ``mallopt``; nothing happens."""
    import ctypes

    try:
        libc = ctypes.CDLL(None)
        libc.mallopt(-3, min(limit, 32 << 20))  # M_MMAP_THRESHOLD
        libc.mallopt(-1, 4 * min(limit, 32 << 20))  # M_TRIM_THRESHOLD
    except (OSError, AttributeError):
        pass


#: what a launcher tells each process it starts about the job's size (MPICH's Hydra and
#: PMI; Open MPI's mpirun): set only in processes a launcher started
_LAUNCHED_SIZE = ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE")


def check_launcher(rank: int, size: int) -> None:
    """Refuse a job whose launcher started more processes than MPI sees: the MPI library
    mpi4py loaded is not the launcher's (Open MPI under MPICH's mpiexec, say), so each
    process runs alone, or crashes; without this a job of N PEs would run N jobs of one."""
    for var in _LAUNCHED_SIZE:
        value = os.environ.get(var, "")
        if value.isdigit() and int(value) != size:
            from ..errors import ShoalError

            library = _first_line(MPI.Get_library_version())
            raise ShoalError(
                f"PE {rank}: the launcher started {value} processes ({var}={value}), but MPI sees {size}: the MPI "
                f"library mpi4py loaded ({library}) is not the one whose mpiexec started the job. Start the job with "
                f"that library's mpiexec, or point mpi4py at the launcher's library (MPI4PY_LIBMPI=/path/to/libmpi.so)"
            )
    tasks = os.environ.get("SLURM_STEP_NUM_TASKS", "")
    if tasks.isdigit() and int(tasks) != size and not any(os.environ.get(var) for var in _LAUNCHED_SIZE):
        from ..errors import ShoalError

        raise ShoalError(
            f"PE {rank}: srun started {tasks} tasks (SLURM_STEP_NUM_TASKS={tasks}), but MPI sees {size}: srun gave "
            "them no process-management interface this MPI understands, so each would run alone. Start the job "
            "with `srun --mpi=pmi2` (MPICH, Intel MPI, Cray MPICH) or `srun --mpi=pmix` (Open MPI); "
            "`srun --mpi=list` shows what this Slurm offers"
        )


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0].strip() if text.strip() else "unknown"


def native_module() -> Any:
    from ..native import load_native

    return load_native()


def _native_status() -> str:
    from ..native import load_native, native_status

    load_native()
    return native_status()


def _abi_name() -> str:
    """Which MPI ABI mpi4py's extension was built for: mpi4py >= 4.1 ships one extension
    per ABI (``MPI.mpich.*.so``, ``MPI.openmpi.*.so``), 4.0 a single one."""
    import os

    name = os.path.basename(MPI.__file__)
    parts = name.split(".")
    if len(parts) < 4:
        return f"the MPI mpi4py was compiled against (a single extension, {name})"
    standard = ""
    get_abi_version = getattr(MPI, "Get_abi_version", None)  # mpi4py >= 4.1
    if get_abi_version is not None:
        major, minor = get_abi_version()
        standard = f"; MPI standard ABI {major}.{minor}" if major >= 0 else ""
    return f"{parts[1]} (extension {name}){standard}"


#: the MPI library's own CUDA query behind each answer of _native/query.c's shoal_query_cuda
_CUDA_QUERIES = {1: "MPIX_GPU_query_support", 2: "MPIX_Query_cuda_support"}


def cuda_aware() -> str:
    """Whether the MPI library sends and receives CUDA device memory itself, as the library
    answers: the compiled path asks it (it is built against the library's own header)."""
    import ctypes

    module = native_module()
    if module is None:
        return "unknown: the compiled path, which asks the MPI library, is unavailable"
    if not MPI.Is_initialized() or MPI.Is_finalized():
        return "unknown: MPI is not initialized, so the library cannot be asked"
    query = getattr(ctypes.CDLL(module.__file__), "shoal_query_cuda", None)
    if query is None:
        return f"unknown: the compiled path {module.__file__} has no shoal_query_cuda (rebuild it: pip install -e .)"
    query.argtypes = [ctypes.POINTER(ctypes.c_int)]
    query.restype = ctypes.c_int
    flag = ctypes.c_int(0)
    used = query(ctypes.byref(flag))
    if used == 0:
        return "unknown: this MPI has no query (neither MPIX_GPU_query_support nor MPIX_Query_cuda_support)"
    if used not in _CUDA_QUERIES:
        return "unknown: MPIX_GPU_query_support returned an error"
    return f"{'yes' if flag.value else 'no'} ({_CUDA_QUERIES[used]})"


def _thread_level() -> str:
    names = {
        MPI.THREAD_SINGLE: "single",
        MPI.THREAD_FUNNELED: "funneled",
        MPI.THREAD_SERIALIZED: "serialized",
        MPI.THREAD_MULTIPLE: "multiple",
    }
    return names.get(MPI.Query_thread(), "unknown")
