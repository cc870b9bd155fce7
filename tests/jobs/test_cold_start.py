"""Cold start of a large job: 32 PEs (over-subscribed on a small machine) start at once on
an empty cache, with an install whose extension cannot be used, so every PE needs the
compiled per-message path built on first use, and a stencil kernel compiled at run time.

The cluster issue asks that both be built once, that no PE ever loads a half-written
object, and that this works with the install directory read-only (a shared site-packages).

The real install is never touched: the package's sources (``*.py``, ``*.c``, ``*.h``; not
the built extension, not its build record ``_native_build.py``) are copied to
``tmp/site/shoal`` and ``tmp/site`` is put first on ``PYTHONPATH``, so the job imports a
shoal with no build record, which builds on first use into ``$SHOAL_CACHE_DIR``.

The compilers are wrappers (``$MPICC`` for the extension, ``$CC`` for stencil kernels) that
log each run. A compile also waits (a bounded time) until the other PEs are blocked on the
build's file lock, read from ``/proc/locks``, and logs how many were: the build then
provably happens while the others wait, which is the case the lock exists for.
"""

from __future__ import annotations

import importlib.machinery
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from support.commands import clean_env

import shoal.native as native
from shoal.compiler import find_cc

pytestmark = [
    pytest.mark.mpi,
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/locks and /proc/<pid>/maps (Linux)"),
]

PES = 32
#: how long one job may take (it takes about 15 s on 2 cores)
JOB_TIMEOUT = 150
#: how long a logged compile waits for the other PEs to queue on the lock before going on
QUEUE_WAIT = {"native": 45.0, "stencil": 20.0}

# The job: a 1-D stencil on one tile per PE, checked against NumPy (its C kernel is
# compiled by PE 0, the frontend, as the statement is recorded; the backends then load it);
# then every PE at once loads one new kernel through the stencil build step (so 32
# processes need the same compile together); then every PE reports its shoal, its compiled
# path and every file under the cache that its address space maps (what the dynamic loader
# really loaded).
_PROGRAM = """
import json, os
import numpy as np
import shoal
from shoal.native import load_native, native_status
from shoal.stencil import Stencil
from shoal.stencil.build import load_kernel

CACHE = os.environ["SHOAL_CACHE_DIR"]
# the marker tells the compiler wrapper to wait for the other PEs to queue on the lock
SHARED = ("/* cold-start: every PE at once */\\n"
          "double shoal_reduce(void **a, long *b, long *c, long *d)\\n"
          "{ (void)a; (void)b; (void)c; (void)d; return 42.0; }\\n")


class Smooth(Stencil):
    fields = {"u": "float64", "v": "float64"}

    def step(self):
        u, v = self.u, self.v
        v[1:-1] = 0.5 * (u[:-2] + u[2:])
        self.u, self.v = v, u


def mapped():
    with open("/proc/self/maps") as f:
        rows = [line.split(None, 5) for line in f]
    return sorted({row[5].strip() for row in rows if len(row) == 6 and row[5].startswith(CACHE)})


class Probe(shoal.Chare):
    def kernel(self):
        return load_kernel(SHARED, reduce=True)(None, None, None, None)

    def report(self):
        module = load_native()
        return {"pe": shoal.my_pe(), "pid": os.getpid(), "shoal": shoal.__file__, "status": native_status(),
                "file": getattr(module, "__file__", None), "mapped": mapped()}


def main(args):
    n = shoal.num_pes()
    grid = Smooth((4 * n,), odf=1)
    x = np.arange(4.0 * n) ** 2
    grid.u.from_numpy(x)
    grid.v.from_numpy(x)
    grid.solve(steps=3)
    got = grid.u.to_numpy()
    u, v = x.copy(), x.copy()
    for _ in range(3):
        v[1:-1] = 0.5 * (u[:-2] + u[2:])
        u, v = v, u
    print("stencil", json.dumps({"equal": bool(np.array_equal(got, u)), "describe": grid.describe()}))
    probes = shoal.Group(Probe)
    print("kernel", json.dumps(probes.kernel(ret=True).get()))
    for r in probes.report(ret=True).get():
        print("pe", json.dumps(r))


shoal.start(main)
"""

# A compiler wrapper: logs its command line (one JSON line); for a compile of a shared
# object (of the extension; of a stencil kernel only if its source has the marker) first
# waits until `want` other processes are blocked on the build's lock (or `wait` seconds
# pass) and logs how many were and which process held the lock.
_WRAPPER = """\
#!{python}
import json, os, sys, time

REAL, LOG, KIND, WANT, WAIT = {real!r}, {log!r}, {kind!r}, {want!r}, {wait!r}
args = sys.argv[1:]
entry = {{"pid": os.getpid(), "ppid": os.getppid(), "args": args}}


def lock_rows(inode):
    # "1: FLOCK  ADVISORY  WRITE <pid> <dev>:<inode> 0 EOF"; a blocked waiter: "1: -> FLOCK ..."
    with open("/proc/locks") as f:
        return [row for row in (line.split() for line in f) if len(row) >= 8 and row[-3].endswith(":%d" % inode)]


if "-shared" in args and "-o" in args:
    out = args[args.index("-o") + 1]
    folder, name = os.path.split(out)
    lock = os.path.join(folder, "build.lock" if KIND == "native" else name.split(".")[0] + ".lock")
    entry["lock"] = lock
    inode = os.stat(lock).st_ino
    wait = WAIT
    if KIND == "stencil":
        with open([a for a in args if a.endswith(".c")][0]) as f:
            wait = WAIT if "cold-start: every PE at once" in f.read() else 0.0
    end = time.monotonic() + wait
    while True:
        rows = lock_rows(inode)
        waiting = [r for r in rows if "->" in r]
        if len(waiting) >= WANT or time.monotonic() > end:
            break
        time.sleep(0.1)
    entry["waiting"] = len(waiting)
    entry["holders"] = [int(r[4]) for r in rows if "->" not in r]
with open(LOG, "a") as f:
    f.write(json.dumps(entry) + "\\n")
os.execv(REAL, [REAL, *args])
"""


def _copy_package(site: Path) -> Path:
    """The package's sources under ``site/shoal``: no extension, no build record."""
    src = Path(native.__file__).resolve().parent
    dst = site / "shoal"
    for path in sorted(src.rglob("*")):
        if (path.is_file() and path.suffix in (".py", ".c", ".h") and path.name != f"{native.RECORD}.py"
                and "__pycache__" not in path.parts):
            target = dst / path.relative_to(src)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, target)
    assert (dst / "_native" / "frames.c").is_file() and not list(dst.glob(f"{native.EXTENSION}*"))
    assert not (dst / f"{native.RECORD}.py").exists()
    return site


def _wrapper(path: Path, real: str, log: Path, kind: str) -> Path:
    path.write_text(_WRAPPER.format(python=sys.executable, real=real, log=str(log), kind=kind, want=PES - 1,
                                    wait=QUEUE_WAIT[kind]))
    path.chmod(0o755)
    return path


def _listing(folder: Path) -> dict[str, tuple[int, int]]:
    """Every path under ``folder`` with its size and mtime (ns)."""
    return {str(p.relative_to(folder)): (p.lstat().st_size, p.lstat().st_mtime_ns) for p in folder.rglob("*")}


class ColdJob:
    """One 32-PE job on an empty cache, its compiler logs and the PEs' reports."""

    def __init__(self, tmp: Path):
        mpicc, cc = native.find_mpicc(), find_cc()
        if mpicc is None:
            pytest.skip("no mpicc to build the compiled path with (set MPICC or install the mpich wheel)")
        if cc is None:
            pytest.skip("no C compiler (cc, gcc or clang) to compile stencil kernels with")
        self.tmp = tmp
        self.site = _copy_package(tmp / "site")
        self.cache = tmp / "cache"
        self.cache.mkdir()
        self.mpicc_log, self.cc_log = tmp / "mpicc.log", tmp / "cc.log"
        self.mpicc = _wrapper(tmp / "mpicc-logged", mpicc, self.mpicc_log, "native")
        self.cc = _wrapper(tmp / "cc-logged", cc, self.cc_log, "stencil")
        self.prog = tmp / "prog.py"
        self.prog.write_text(textwrap.dedent(_PROGRAM))
        self.env = clean_env()
        self.env.update(
            PYTHONPATH=os.pathsep.join([str(self.site), *filter(None, [os.environ.get("PYTHONPATH")])]),
            SHOAL_CACHE_DIR=str(self.cache), SHOAL_IDLE_YIELD="1", MPICC=str(self.mpicc), CC=str(self.cc),
        )
        self.proc: subprocess.CompletedProcess | None = None

    def run(self, prefix: list[str] = ()) -> subprocess.CompletedProcess:
        """Run the job (in its own session: on a timeout its whole process group is ended)."""
        cmd = [*prefix, sys.executable, "-m", "shoal", "run", "-n", str(PES), str(self.prog)]
        with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=self.env,
                              cwd=self.tmp, start_new_session=True) as proc:
            try:
                out, err = proc.communicate(timeout=JOB_TIMEOUT)
            except subprocess.TimeoutExpired:
                out = err = ""
                for sig in (signal.SIGTERM, signal.SIGKILL):
                    try:
                        os.killpg(proc.pid, sig)
                        out, err = proc.communicate(timeout=10)
                        break
                    except ProcessLookupError:
                        break
                    except subprocess.TimeoutExpired:
                        continue
                pytest.fail(f"the {PES}-PE cold start did not finish in {JOB_TIMEOUT} s (a hang)\n"
                            f"--- stdout\n{out}\n--- stderr\n{err}")
        self.proc = subprocess.CompletedProcess(cmd, proc.returncode, out, err)
        return self.proc

    def __repr__(self) -> str:
        p = self.proc
        return f"<ColdJob rc={p and p.returncode}\n--- stdout\n{p and p.stdout}\n--- stderr\n{p and p.stderr}>"

    @property
    def reports(self) -> list[dict]:
        assert self.proc is not None
        return [json.loads(ln[3:]) for ln in self.proc.stdout.splitlines() if ln.startswith("pe ")]

    @property
    def stencil(self) -> dict:
        assert self.proc is not None
        lines = [ln for ln in self.proc.stdout.splitlines() if ln.startswith("stencil ")]
        assert len(lines) == 1, self
        return json.loads(lines[0][len("stencil "):])

    @property
    def kernel_values(self) -> list[float]:
        assert self.proc is not None
        lines = [ln for ln in self.proc.stdout.splitlines() if ln.startswith("kernel ")]
        assert len(lines) == 1, self
        return json.loads(lines[0][len("kernel "):])

    @staticmethod
    def _log(path: Path) -> list[dict]:
        return [json.loads(ln) for ln in path.read_text().splitlines()] if path.exists() else []

    def extension_compiles(self) -> list[dict]:
        """The wrapper's runs that compiled the extension (not the ABI probe, not ``-show``)."""
        return [e for e in self._log(self.mpicc_log) if "-shared" in e["args"]]

    def probes(self) -> list[dict]:
        return [e for e in self._log(self.mpicc_log) if "-DSHOAL_QUERY_MAIN" in e["args"]]

    def kernel_compiles(self) -> list[dict]:
        """The wrapper's runs that compiled a stencil object (not ``cc --version``)."""
        return [e for e in self._log(self.cc_log) if "-shared" in e["args"]]

    def shared_kernel_compile(self) -> dict:
        """The compile of the kernel every PE asked for at once (its source has the marker)."""
        found = [k for k in self.kernel_compiles()
                 if "cold-start: every PE at once" in Path([a for a in k["args"] if a.endswith(".c")][0]).read_text()]
        assert len(found) == 1, [k["args"] for k in self.kernel_compiles()]
        return found[0]

    @property
    def target(self) -> Path:
        """The one first-use build folder's extension: ``<cache>/native/<key>/_shoal_native<suffix>``."""
        folders = [p for p in (self.cache / "native").iterdir() if p.is_dir()]
        assert len(folders) == 1, folders
        return folders[0] / (native.EXTENSION + importlib.machinery.EXTENSION_SUFFIXES[0])

    def check_built_once(self) -> None:
        """The assertions common to both jobs: success, one build of each, every PE on it."""
        assert self.proc is not None and self.proc.returncode == 0, self
        reports = self.reports
        assert sorted(r["pe"] for r in reports) == list(range(PES)), self
        assert len({r["pid"] for r in reports}) == PES, "each PE is its own process"
        assert all(r["shoal"].startswith(str(self.site)) for r in reports), "the job imported the copy"
        # the compiled per-message path: built once, on first use, by one of the PEs
        compiles = self.extension_compiles()
        assert len(compiles) == 1, [c["args"] for c in compiles]
        assert len(self.probes()) == 1, "the ABI probe (inside the lock) ran once too"
        target = self.target
        assert target.is_file()
        assert {r["file"] for r in reports} == {str(target)}, {r["file"] for r in reports}
        for r in reports:
            assert r["status"].startswith(f"built on first use in {target} because no extension was built at "
                                          f"install (there is no build record {self.site}"), r["status"]
        assert compiles[0]["ppid"] in {r["pid"] for r in reports}, "a PE ran the compiler"
        # the stencil: correct, its kernel compiled once (one compile per object in the cache)
        assert self.stencil["equal"] and "C kernels" in self.stencil["describe"], self.stencil
        kernels = self.kernel_compiles()
        outputs = [Path(k["args"][k["args"].index("-o") + 1]) for k in kernels]
        keys = [o.name.split(".")[0] for o in outputs]
        objects = sorted(p.stem for p in (self.cache / "stencil").glob("*.so"))
        assert len(kernels) >= 2 and sorted(keys) == objects, (keys, objects)  # the statement's, the shared one
        assert len(set(keys)) == len(keys), f"a kernel compiled more than once: {keys}"
        assert all(k["ppid"] in {r["pid"] for r in reports} for k in kernels)
        assert self.kernel_values == [42.0] * PES, self.kernel_values
        for r in reports:  # every PE (one tile each) loaded the kernels the one compile of each made
            assert {f"{self.cache}/stencil/{key}.so" for key in keys} <= set(r["mapped"]), r


@pytest.fixture(scope="module")
def cold_job(tmp_path_factory: pytest.TempPathFactory) -> ColdJob:
    """The 32-PE job on an empty cache (run once; tests 1 and 3 read it)."""
    job = ColdJob(tmp_path_factory.mktemp("cold"))
    job.run()
    return job


def test_32_pes_on_an_empty_cache_build_each_compiled_part_once(cold_job):
    """32 PEs start at once on an empty cache with no usable installed extension: the
    job succeeds; the wrapper given as MPICC compiled the extension exactly once (and ran
    the ABI probe once), while the other PEs waited on the lock; every PE loaded that one
    file from the cache and says so; the stencil's kernel compiled once (the CC wrapper's
    log: one compile per object), its result equals NumPy's, and every PE loaded it."""
    cold_job.check_built_once()
    compile_ = cold_job.extension_compiles()[0]
    assert compile_["waiting"] >= 1, f"no PE was waiting on the lock while the extension compiled: {compile_}"
    shared = cold_job.shared_kernel_compile()
    assert shared["waiting"] >= 1, f"no PE was waiting on the lock while the shared kernel compiled: {shared}"


def test_no_pe_loads_a_half_written_object(cold_job):
    """Nothing but a final name is ever loaded: each compile wrote a temporary name in
    the target's own folder (so the rename that publishes it is atomic); the lock was held
    by the compiling PE while others were queued on it; every file under the cache mapped
    by any PE is a final object (no ``.tmp``, none replaced or deleted under it); the lock
    files exist and no temporary file is left behind."""
    job = cold_job
    assert job.proc is not None and job.proc.returncode == 0, job
    target = job.target
    assert (target.parent / "build.lock").is_file()
    compile_ = job.extension_compiles()[0]
    tmp_out = Path(compile_["args"][compile_["args"].index("-o") + 1])
    assert tmp_out.parent == target.parent and tmp_out != target and ".tmp" in tmp_out.name, tmp_out
    assert compile_["lock"] == str(target.parent / "build.lock")
    assert compile_["holders"] == [compile_["ppid"]], f"the compiling PE holds the build lock: {compile_}"
    for k in job.kernel_compiles():
        out = Path(k["args"][k["args"].index("-o") + 1])
        key = out.name.split(".")[0]
        assert out.parent == job.cache / "stencil" and ".tmp" in out.name, out
        assert k["lock"] == str(job.cache / "stencil" / f"{key}.lock") and Path(k["lock"]).is_file()
        assert k["holders"] == [k["ppid"]], f"the compiling PE holds the kernel's lock: {k}"
    finals = {str(target)} | {str(p) for p in (job.cache / "stencil").glob("*.so")}
    for r in job.reports:
        assert r["file"] == str(target)
        assert r["mapped"] and set(r["mapped"]) <= finals, r["mapped"]
        assert not any(".tmp" in m or "(deleted)" in m for m in r["mapped"]), r["mapped"]
    assert not [p for p in job.cache.rglob("*") if ".tmp" in p.name], "a temporary object was left behind"


def _read_only(directory: Path) -> list[str]:
    """The command prefix that runs a command with ``directory`` bind-mounted read-only in
    a private mount namespace (as root, file modes would not stop a write)."""
    script = 'mount --bind "$0" "$0" && mount -o remount,bind,ro "$0" && exec "$@"'
    return ["unshare", "--mount", "--propagation", "private", "sh", "-c", script, str(directory)]


def test_read_only_install_builds_into_the_cache_only(tmp_path):
    """The same cold start with the install directory a read-only bind mount (in a private
    mount namespace): writing into it inside that namespace fails (checked first; the test
    is skipped where unshare or mount is not permitted); the job still succeeds, builds
    once, and the builds land in the cache only: nothing under the install changes."""
    job = ColdJob(tmp_path)
    if shutil.which("unshare") is None or shutil.which("mount") is None:
        pytest.skip("unshare or mount is not installed")
    probe = job.site / "shoal" / "write-probe"
    check = subprocess.run([*_read_only(job.site), "sh", "-c", f'echo x > "{probe}"'], capture_output=True,
                           text=True, timeout=30)
    if probe.exists():
        probe.unlink()
        pytest.skip(f"the bind mount of {job.site} was not read-only (stderr: {check.stderr.strip()!r})")
    if "Read-only file system" not in check.stderr:
        pytest.skip(f"unshare/mount not permitted here: {check.stderr.strip() or check.returncode}")
    before = _listing(job.site)
    job.run(_read_only(job.site))
    job.check_built_once()
    assert _listing(job.site) == before, "a build (or anything) wrote into the read-only install"
    assert not list(job.site.rglob("__pycache__")) and not list(job.site.rglob("*.so"))
    assert job.target.is_file() and job.target.parent.parent == job.cache / "native"
