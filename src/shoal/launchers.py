"""Which MPI launcher a job uses, and the command line each family needs.

``shoal run -n N prog.py`` starts ``mpiexec -n N python -m shoal prog.py``, but the
launchers differ in what they must be told:

* **Open MPI** (``prterun``/``orterun`` beside its ``mpiexec``) refuses to start more
  processes than the node has cores unless asked (``--oversubscribe``), binds each
  process to a core of its own by default (shoal's idle policy reads the node's CPUs
  from every PE's affinity, so bound PEs still spin), and refuses to run as root
  unless ``OMPI_ALLOW_RUN_AS_ROOT=1`` and ``OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1`` are set:
  shoal says so rather than setting them behind the user's back.
* **MPICH** (Hydra) over-subscribes and does not bind by default.
* **Slurm**: inside an allocation (``salloc``, ``sbatch``: ``SLURM_JOB_ID`` is set) with
  ``srun`` on ``PATH``, a job starts with ``srun --mpi=pmi2`` on the allocation's task
  count unless ``-n`` says otherwise; Open MPI's own ``mpiexec`` reads the allocation
  itself and is used as it is.

Nothing here runs a program: the family is read from the files beside the launcher,
so ``shoal run`` starts as fast as before.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False  # typing is for type checkers: the launcher's start-up skips its import
if TYPE_CHECKING:
    from typing import Mapping, Sequence

__all__ = ["Launch", "family", "in_allocation", "allocation_size", "default_pes", "plan", "RootRefused"]

#: files whose presence beside an ``mpiexec`` names its MPI family
_MARKERS = (("openmpi", ("prterun", "orterun", "ompi_info")), ("mpich", ("mpiexec.hydra", "hydra_pmi_proxy")))


class RootRefused(SystemExit):
    """Open MPI's launcher would refuse to run as root; the message says how to allow it."""


def family(launcher: str) -> str:
    """``openmpi``, ``mpich``, ``srun`` or ``unknown``: the family of the launcher at path
    ``launcher``, from its name and the files beside it (symbolic links followed)."""
    name = os.path.basename(launcher)
    if name == "srun":
        return "srun"
    for path in dict.fromkeys((launcher, os.path.realpath(launcher))):
        folder = os.path.dirname(path)
        for kind, markers in _MARKERS:
            if any(os.path.exists(os.path.join(folder, marker)) for marker in markers):
                return kind
    return "unknown"


def in_allocation(environ: Mapping[str, str] | None = None) -> bool:
    """Whether this process runs inside a Slurm allocation (``salloc``, ``sbatch``)."""
    env = os.environ if environ is None else environ
    return bool(env.get("SLURM_JOB_ID") or env.get("SLURM_JOBID"))


def allocation_size(environ: Mapping[str, str] | None = None) -> int | None:
    """The task count of this Slurm allocation (``SLURM_NTASKS``), or None."""
    env = os.environ if environ is None else environ
    for name in ("SLURM_NTASKS", "SLURM_NPROCS"):
        value = env.get(name, "")
        if value.isdecimal() and int(value) > 0:
            return int(value)
    return None


def default_pes(environ: Mapping[str, str] | None = None) -> int:
    """PEs of a job whose ``-n`` is not given: the allocation's tasks inside one, else 2."""
    return (allocation_size(environ) if in_allocation(environ) else None) or 2


def _node_cores() -> int:
    """The CPUs this launcher may use: what the PEs it starts here will share."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


class Launch:
    """The command that starts a job's PEs, and why it has the options it has."""

    __slots__ = ("command", "family", "notes")

    def __init__(self, command: list[str], kind: str, notes: list[str]):
        self.command, self.family, self.notes = command, kind, notes

    def __repr__(self) -> str:
        return f"Launch({self.command!r}, family={self.family!r})"


def plan(launcher: str, pes: int, program: Sequence[str], environ: Mapping[str, str] | None = None,
         srun: str | None = None) -> Launch:
    """The command that runs ``program`` (the argument list after the launcher's options)
    on ``pes`` PEs with ``launcher``; ``srun``: Slurm's launcher, used instead of an MPICH
    or unknown one inside an allocation. Raises :class:`RootRefused` for Open MPI as root
    without its two permission variables."""
    env = os.environ if environ is None else environ
    kind = family(launcher)
    notes: list[str] = []
    if srun is not None and kind != "openmpi" and in_allocation(env):
        notes.append(f"inside Slurm allocation {env.get('SLURM_JOB_ID') or env.get('SLURM_JOBID')}: srun with PMI-2")
        return Launch([srun, "--mpi=pmi2", "-n", str(pes), *program], "srun", notes)
    command = [launcher, "-n", str(pes)]
    if kind == "openmpi":
        if hasattr(os, "geteuid") and os.geteuid() == 0 and not (
                env.get("OMPI_ALLOW_RUN_AS_ROOT") == "1" and env.get("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM") == "1"):
            raise RootRefused(
                f"shoal run: Open MPI's launcher ({launcher}) refuses to run as root; run as another user, or "
                "allow it, as containers often must: export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1"
            )
        cores = _node_cores()
        if not in_allocation(env) and pes > cores:
            command.append("--oversubscribe")
            notes.append(f"--oversubscribe: {pes} PEs on {cores} cores (Open MPI refuses more PEs than cores unless asked)")
        notes.append("Open MPI binds each PE to a core unless over-subscribed")
    return Launch([*command, *program], kind, notes)
