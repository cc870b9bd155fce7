"""A real one-node Slurm on this machine, for tests: ``with one_node_slurm(tmp_path) as cluster``.

It writes a munge key and a ``slurm.conf`` into ``tmp_path``, starts ``munged``,
``slurmctld`` and ``slurmd`` in the foreground as children of this process (no systemd,
no files outside ``tmp_path`` but a short runtime folder under ``/tmp`` when ``tmp_path``
is too long for a Unix socket path), waits until ``sinfo`` says the node is idle, and
yields a :class:`SlurmCluster` whose ``env`` runs ``srun``/``salloc``/``sbatch`` against
it. At exit every job is cancelled and every daemon it started is stopped and reaped;
a job step daemon (``slurmstepd``, which detaches from ``slurmd``) still holding this
cluster's log open is killed with its processes.

Nothing but this machine is contacted: the controller and the node are addressed as
127.0.0.1, the ports are free ones chosen here, accounting is off and no system plugin
stack is read. Debian's ``slurm-wlm`` and ``munge`` are what it needs; without them, as
a non-root user, or where the container forbids a daemon, it raises
:class:`SlurmUnavailable` with the reason (tests skip with it).

The configuration that matters (the pitfalls found while making it work in a container):

* ``ProctrackType=proctrack/linuxproc`` and ``TaskPlugin=task/none``: the cgroup
  plugins fail in containers.
* ``MpiDefault=pmi2``: the ``mpich`` wheel's libmpi (PMI-1 wire protocol on ``PMI_FD``,
  its default ``MPIR_CVAR_PMI_VERSION=1``) talks to ``srun --mpi=pmi2``; Debian's
  ``--mpi=pmix`` needs ``libpmix`` (not installed), and ``--mpi=none`` starts singletons.
* ``munged --force``: munged refuses a socket folder that is not world-executable all the
  way up (pytest's folders are 0700) unless forced; ``AuthInfo=socket=...`` points
  every Slurm program (daemons and clients alike) at this munged.
* ``SlurmdParameters=config_overrides``: the node is trusted to have the CPUs declared,
  so ``srun -n 2`` works on a one-core machine too.
* ``FirstJobId`` random: MPICH names its shared memory ``/dev/shm/mpich_shm_<FNV-1a of
  the PMI kvsname, hex>_<node>``, and under srun the kvsname is ``<jobid>.<stepid>``. A
  step killed before ``MPI_Finalize`` leaves its segment behind, and a later job with the
  same id (every cluster started with ``slurmctld -c`` counts from 1) attaches to the
  stale one: ``MPI_Init`` fails ("Message from rank 1 and tag 7 truncated") or hangs. At
  exit the segments this cluster's steps left are removed.
"""

from __future__ import annotations

import contextlib
import os
import random
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

__all__ = ["SlurmUnavailable", "SlurmCluster", "one_node_slurm"]

#: Where Debian puts the daemons (root's PATH has them; a test's PATH may not).
_SBIN = ("/usr/sbin", "/usr/local/sbin", "/sbin")
#: Environment variables of an enclosing job or launcher that would mislead srun/salloc.
_FOREIGN_PREFIXES = ("SLURM_", "SALLOC_", "SBATCH_", "SRUN_", "PMI_", "PMIX_", "OMPI_", "HYDRA_", "MPIR_CVAR_PMI")
#: Where MPICH keeps its shared-memory segments, and the most steps per job swept at exit.
_SHM = Path("/dev/shm")
_STEPS_SWEPT = 64
#: The longest folder that leaves room for a Unix socket name (108 bytes on Linux) under it.
_MAX_RUNTIME_DIR = 70


class SlurmUnavailable(RuntimeError):
    """The one-node Slurm cannot run here; ``reason`` says why (a test skips with it)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass
class SlurmCluster:
    """A running one-node cluster.

    ``env`` is the environment for Slurm's clients (``srun``, ``salloc``, ``sbatch``,
    ``sinfo``...): this process's, less any enclosing job's ``SLURM_*``/``PMI_*``
    variables, with ``SLURM_CONF`` naming the generated configuration.
    """

    conf: Path
    node: str
    cpus: int
    log_dir: Path
    env: dict[str, str] = field(default_factory=dict)

    def logs(self, tail: int = 40) -> str:
        """The last ``tail`` lines of every daemon's log, for a failing test's message."""
        parts = []
        for path in sorted(self.log_dir.glob("*")):
            if path.is_file():
                lines = path.read_text(errors="replace").splitlines()[-tail:]
                parts.append(f"--- {path.name}\n" + "\n".join(lines))
        return "\n".join(parts)


def _find(name: str) -> str:
    """The path of the program ``name`` on PATH or in an sbin folder; SlurmUnavailable if none."""
    path = shutil.which(name) or shutil.which(name, path=os.pathsep.join(_SBIN))
    if path is None:
        raise SlurmUnavailable(f"{name} not found (apt-get install slurm-wlm munge)")
    return path


def _free_port() -> int:
    """A TCP port free on the loopback now (another program may take it before Slurm does)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _config(*, node: str, cpus: int, run: Path, top: Path, munge_socket: Path, ports: tuple[int, int],
            first_job: int) -> str:
    """The text of slurm.conf for one node ``node`` with ``cpus`` CPUs, its state under ``top``/``run``."""
    return "\n".join([
        "ClusterName=shoaltest",
        f"FirstJobId={first_job}",
        f"SlurmctldHost={node}(127.0.0.1)",
        f"SlurmctldPort={ports[0]}",
        f"SlurmdPort={ports[1]}",
        "SlurmUser=root",
        "SlurmdUser=root",
        "AuthType=auth/munge",
        f"AuthInfo=socket={munge_socket}",
        "CredType=cred/munge",
        "MpiDefault=pmi2",
        "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/none",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_CPU",
        "SchedulerType=sched/builtin",
        "SlurmdParameters=config_overrides",
        "ReturnToService=2",
        "AccountingStorageType=accounting_storage/none",
        "JobAcctGatherType=jobacct_gather/none",
        "JobCompType=jobcomp/none",
        "MailProg=/bin/true",
        f"PlugStackConfig={top / 'plugstack.conf'}",
        "KillWait=5",
        "InactiveLimit=0",
        f"StateSaveLocation={top / 'state'}",
        f"SlurmdSpoolDir={run / 'spool'}",
        f"SlurmctldPidFile={top / 'slurmctld.pid'}",
        f"SlurmdPidFile={top / 'slurmd.pid'}",
        f"SlurmctldLogFile={top / 'log' / 'slurmctld.log'}",
        f"SlurmdLogFile={top / 'log' / 'slurmd.log'}",
        f"NodeName={node} NodeAddr=127.0.0.1 CPUs={cpus} RealMemory=1000 State=UNKNOWN",
        f"PartitionName=debug Nodes={node} Default=YES MaxTime=INFINITE State=UP",
        "",
    ])


def _client_env(conf: Path) -> dict[str, str]:
    """This process's environment for Slurm's clients, pointed at ``conf``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(_FOREIGN_PREFIXES)}
    env["SLURM_CONF"] = str(conf)
    return env


def _stop(proc: subprocess.Popen[bytes], grace: float = 10.0) -> None:
    """SIGTERM ``proc``, SIGKILL it after ``grace`` seconds, and reap it."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            proc.terminate()
        try:
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            proc.wait(timeout=grace)


def _children() -> dict[int, list[int]]:
    """Every process's children, by parent pid, from /proc."""
    tree: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError, IndexError, ValueError):
                stat = Path(f"/proc/{entry}/stat").read_text()
                ppid = int(stat.rsplit(")", 1)[1].split()[1])
                tree.setdefault(ppid, []).append(int(entry))
    return tree


def _holders(folder: Path) -> list[int]:
    """The pids of processes named slurmstepd with a file under ``folder`` open (this cluster's steps)."""
    found = []
    prefix = str(folder) + os.sep
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        with contextlib.suppress(OSError):
            if Path(f"/proc/{entry}/comm").read_text().strip() != "slurmstepd":
                continue
            for fd in os.listdir(f"/proc/{entry}/fd"):
                with contextlib.suppress(OSError):
                    if os.readlink(f"/proc/{entry}/fd/{fd}").startswith(prefix):
                        found.append(int(entry))
                        break
    return found


def _kill_stray_steps(folders: list[Path]) -> None:
    """SIGKILL any step daemon of this cluster still alive, and everything under it."""
    stray = [pid for folder in folders for pid in _holders(folder)]
    if not stray:
        return
    tree = _children()
    doomed, todo = [], list(stray)
    while todo:
        pid = todo.pop()
        doomed.append(pid)
        todo.extend(tree.get(pid, []))
    for pid in doomed:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)


def _fnv1a(text: str) -> int:
    """32-bit FNV-1a of ``text`` (MPICH's HASH_FNV, which turns the PMI kvsname into its world id)."""
    value = 2166136261
    for byte in text.encode():
        value = ((value ^ byte) * 16777619) & 0xFFFFFFFF
    return value


def _sweep_mpich_segments(jobs: range) -> None:
    """Remove the /dev/shm segments MPICH left for steps of ``jobs`` (kvsname ``<job>.<step>``)."""
    try:
        names = os.listdir(_SHM)
    except OSError:
        return
    ours = {f"{_fnv1a(f'{job}.{step}'):x}" for job in jobs for step in range(_STEPS_SWEPT)}
    for name in names:
        parts = name.split("_")  # mpich_shm_<world id, hex>_<node id>
        if len(parts) == 4 and parts[0] == "mpich" and parts[1] in ("shm", "vci") and parts[2] in ours:
            with contextlib.suppress(OSError):
                (_SHM / name).unlink()


def _next_job_id(scontrol: str, env: dict[str, str]) -> int | None:
    """The controller's NEXT_JOB_ID, or None when it does not answer."""
    result = _run([scontrol, "show", "config"], env, timeout=5)
    for line in (result.stdout if result is not None else "").splitlines():
        key, _, value = line.partition("=")
        if key.strip() == "NEXT_JOB_ID" and value.strip().isdigit():
            return int(value)
    return None


def _run(cmd: list[str], env: dict[str, str], timeout: float = 10) -> subprocess.CompletedProcess[str] | None:
    """Run a Slurm client quietly; None when it could not run or outlived ``timeout``."""
    try:
        return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired):
        return None


def _log_tail(path: Path, lines: int = 15) -> str:
    """The last ``lines`` lines of ``path``, or '' when it is missing."""
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


@contextlib.contextmanager
def one_node_slurm(tmp_path: Path, *, cpus: int | None = None, ready_timeout: float = 30.0) -> Iterator[SlurmCluster]:
    """Start munged, slurmctld and slurmd for a one-node cluster kept in ``tmp_path``.

    ``cpus`` is the node's CPU count (default: this machine's, at least 2). Waits up to
    ``ready_timeout`` seconds for ``sinfo`` to report the node idle. Raises
    :class:`SlurmUnavailable` (having stopped whatever it started) when a program is
    missing, this process is not root, or a daemon fails to start or to become ready.
    """
    if os.geteuid() != 0:
        raise SlurmUnavailable("the one-node Slurm needs root (slurmd starts job steps as their user)")
    munged, slurmctld, slurmd = _find("munged"), _find("slurmctld"), _find("slurmd")
    sinfo, squeue, scancel, scontrol = _find("sinfo"), _find("squeue"), _find("scancel"), _find("scontrol")
    for client in ("srun", "salloc"):
        _find(client)

    top = Path(tmp_path).resolve()
    own_run = len(str(top)) > _MAX_RUNTIME_DIR
    run = Path(tempfile.mkdtemp(prefix="shoal-slurm-")) if own_run else top / "run"
    node = socket.gethostname().split(".")[0]
    cpus = cpus or max(os.cpu_count() or 1, 2)
    log_dir = top / "log"
    for folder in (top / "state", log_dir, run / "spool", run / "munge"):
        folder.mkdir(parents=True, exist_ok=True)
    munge_dir = run / "munge"
    munge_socket = munge_dir / "munge.socket"
    key = top / "munge.key"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o600)
    (top / "plugstack.conf").write_text("")
    conf = top / "slurm.conf"
    first_job = random.randrange(1000, 60_000_000)  # job ids (and MPICH's segment names) unlike any earlier cluster's
    next_job = first_job
    conf.write_text(_config(node=node, cpus=cpus, run=run, top=top, munge_socket=munge_socket,
                            ports=(_free_port(), _free_port()), first_job=first_job))
    env = _client_env(conf)
    cluster = SlurmCluster(conf=conf, node=node, cpus=cpus, log_dir=log_dir, env=env)

    daemons: list[tuple[str, subprocess.Popen[bytes]]] = []

    def start(name: str, argv: list[str]) -> subprocess.Popen[bytes]:
        out = open(log_dir / f"{name}.out", "wb")
        try:
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                    env=env, cwd=top, start_new_session=True)
        except OSError as err:
            raise SlurmUnavailable(f"{name} could not start: {err}") from err
        finally:
            out.close()
        daemons.append((name, proc))
        return proc

    def check_alive() -> None:
        for name, proc in daemons:
            if proc.poll() is not None:
                raise SlurmUnavailable(f"{name} exited with code {proc.returncode}:\n"
                                       f"{_log_tail(log_dir / f'{name}.out')}\n{_log_tail(log_dir / f'{name}.log')}")

    try:
        start("munged", [munged, "--foreground", "--force", f"--socket={munge_socket}", f"--key-file={key}",
                         f"--pid-file={munge_dir / 'munged.pid'}", f"--log-file={log_dir / 'munged.log'}",
                         f"--seed-file={munge_dir / 'munged.seed'}"])
        deadline = time.monotonic() + ready_timeout
        while not munge_socket.exists():
            check_alive()
            if time.monotonic() > deadline:
                raise SlurmUnavailable(f"munged made no socket in {ready_timeout:g} s:\n{cluster.logs(15)}")
            time.sleep(0.1)
        start("slurmctld", [slurmctld, "-D", "-c", "-f", str(conf)])
        start("slurmd", [slurmd, "-D", "-N", node, "-f", str(conf)])
        state = ""
        while state != "idle":
            check_alive()
            if time.monotonic() > deadline:
                raise SlurmUnavailable(f"node not idle after {ready_timeout:g} s (sinfo: {state!r}):\n"
                                       f"{cluster.logs(15)}")
            time.sleep(0.3)
            result = _run([sinfo, "-h", "-o", "%T"], env, timeout=5)
            state = result.stdout.strip() if result is not None and result.returncode == 0 else ""
        yield cluster
    finally:
        if any(name == "slurmctld" and proc.poll() is None for name, proc in daemons):
            next_job = _next_job_id(scontrol, env) or first_job + 1000
            _run([scancel, "--user", "root"], env)
            deadline = time.monotonic() + 15
            while time.monotonic() < deadline:
                jobs = _run([squeue, "-h", "-o", "%i"], env, timeout=5)
                if jobs is None or jobs.returncode != 0 or not jobs.stdout.strip():
                    break
                time.sleep(0.3)
        for _, proc in reversed(daemons):
            _stop(proc)
        _kill_stray_steps([top, run])
        _sweep_mpich_segments(range(first_job, next_job))
        if own_run:
            shutil.rmtree(run, ignore_errors=True)
