"""Packaging: the compiled path pip builds at install, its record and fallbacks, ``shoal info``'s
measured rows, the metadata, and stencil kernels compiled once by many processes at once.

The checks that load MPI run in subprocesses, so this process never initializes MPI.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
import time
import tomllib
from pathlib import Path

import pytest
from support.commands import clean_env
from support import ROOT

import shoal.native as native


def _python(code: str, env: dict[str, str] | None = None, timeout: float = 180) -> subprocess.CompletedProcess:
    """Run ``code`` in a fresh interpreter of this environment (its own MPI, its own loader state)."""
    environ = clean_env()
    environ.update(env or {})
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          timeout=timeout, env=environ, cwd=ROOT)


def _report(code: str, env: dict[str, str] | None = None) -> dict:
    """Run ``code`` (which ends by printing one JSON object) and return that object."""
    proc = _python(code, env)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _info_rows(stdout: str) -> dict[str, str]:
    rows = {}
    for line in stdout.splitlines():
        m = re.match(r"(\S.*?)\s{2,}(.*)$", line)
        if m:
            rows[m.group(1)] = m.group(2)
    return rows


@pytest.fixture(scope="module")
def first_use_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One cache for the fallback tests: the first compiles on first use, the rest reuse it."""
    return tmp_path_factory.mktemp("native-cache")


@pytest.fixture(scope="module")
def installed() -> dict:
    """The install's build record; these tests need pip to have built the extension."""
    config = native.build_config()
    if not config.get("built"):
        pytest.fail(f"the install built no extension: {config.get('reason')} (run `make` or `pip install -e .`)")
    return config


# -- the installed extension ---------------------------------------------------------------
def test_installed_extension_is_the_one_loaded(installed):
    out = _report(
        """
        import json
        from shoal.native import load_native, native_status
        m = load_native()
        print(json.dumps({"status": native_status(), "file": getattr(m, "__file__", None),
                          "frames": hasattr(m, "Frames"), "core": hasattr(m, "Core")}))
        """
    )
    ext = Path(native.__file__).parent / f"{native.EXTENSION}{_ext_suffix()}"
    assert out["status"].startswith(f"installed extension {ext} ("), out["status"]
    assert out["file"] == str(ext)
    assert out["frames"] and out["core"]


def _ext_suffix() -> str:
    import sysconfig

    return str(sysconfig.get_config_var("EXT_SUFFIX"))


def test_build_config_records_how_it_was_built(installed):
    out = _report(
        """
        import json, platform
        import mpi4py, numpy
        from mpi4py import MPI
        print(json.dumps({"mpi4py": mpi4py.__version__, "numpy": numpy.__version__, "python": platform.python_version(),
                          "library": MPI.Get_library_version().strip()}))
        """
    )
    assert installed["mpi4py"] == out["mpi4py"] and installed["python"] == out["python"]
    assert installed["numpy"].split(".")[0] >= out["numpy"].split(".")[0]
    assert installed["mpi_library"] == out["library"]
    assert installed["sources"] == native.source_digest(), "C sources changed since the install: run `make`"
    assert installed["flags"] == list(native.CFLAGS)
    assert Path(installed["mpicc"]).name.startswith("mpicc")
    assert installed["command"][0] == installed["mpicc"] and all(f in installed["command"] for f in native.CFLAGS)
    assert {Path(s).name for s in installed["command"] if s.endswith(".c")} == {Path(p).name for p in native.SOURCES}
    assert installed["mpi_header"].split()[0] in out["library"], (installed["mpi_header"], out["library"])
    assert installed["mpicc_runs"]


def test_build_config_without_a_record_says_how_to_get_one(monkeypatch):
    import importlib

    real = importlib.import_module

    def no_record(name: str, *args: object) -> object:
        if name.endswith(native.RECORD):
            raise ModuleNotFoundError(name)
        return real(name, *args)

    monkeypatch.setattr(importlib, "import_module", no_record)
    config = native.build_config()
    assert config["built"] is False and "pip install -e ." in config["reason"]


# -- falling back to a first-use build ------------------------------------------------------
_PATCHED = """
    import json
    import shoal.native as native
    real = native.build_config()
    patched = {patch}
    native.build_config = lambda: patched
    {extra}
    m = native.load_native()
    print(json.dumps({{"status": native.native_status(), "loaded": m is not None,
                      "frames": hasattr(m, "Frames"), "file": getattr(m, "__file__", None)}}))
"""


def _fallback(patch: str, cache: Path, extra: str = "", env: dict[str, str] | None = None) -> dict:
    return _report(_PATCHED.format(patch=patch, extra=extra), {"SHOAL_CACHE_DIR": str(cache), **(env or {})})


def test_other_mpi4py_builds_on_first_use_and_says_why(installed, first_use_cache):
    out = _fallback('dict(real, mpi4py="0.0.1")', first_use_cache)
    assert out["loaded"] and out["frames"], out
    assert out["status"].startswith(f"built on first use in {first_use_cache}/"), out["status"]
    assert out["status"].endswith(f"because the installed extension was built against mpi4py 0.0.1, "
                                  f"this is mpi4py {installed['mpi4py']}")
    assert out["file"].startswith(str(first_use_cache))


def test_other_mpi_library_builds_on_first_use_and_says_why(installed, first_use_cache):
    out = _fallback('dict(real, mpi_library="Open MPI v9.9.9, package: elsewhere")', first_use_cache)
    assert out["loaded"], out
    first = installed["mpi_library"].splitlines()[0].strip()
    assert out["status"].endswith(f"because the installed extension was built against another MPI library "
                                  f"(Open MPI v9.9.9, package: elsewhere; this process uses {first})"), out["status"]


def test_changed_sources_build_on_first_use(installed, first_use_cache):
    out = _fallback('dict(real, sources="0000000000000000")', first_use_cache)
    assert out["loaded"] and "because the C sources changed since the install built it" in out["status"], out


def test_not_built_at_install_builds_on_first_use(first_use_cache):
    reason = "not built at install: no mpicc found ($MPICC is unset, none beside /x/bin/python, none on PATH)"
    out = _fallback(f"{{'built': False, 'reason': {reason!r}}}", first_use_cache)
    assert out["loaded"] and out["status"].endswith(f"because {reason}"), out


def test_unloadable_installed_extension_builds_on_first_use(installed, first_use_cache, tmp_path):
    broken = tmp_path / f"{native.EXTENSION}{_ext_suffix()}"
    broken.write_bytes(b"not an ELF object")
    out = _fallback("real", first_use_cache, extra=f"native._installed = lambda: __import__('pathlib').Path({str(broken)!r})")
    assert out["loaded"], out
    assert f"because the installed extension {broken} did not load (ImportError: " in out["status"], out["status"]


def test_missing_installed_extension_builds_on_first_use(installed, first_use_cache, tmp_path):
    gone = tmp_path / "gone.so"
    out = _fallback("real", first_use_cache, extra=f"native._installed = lambda: __import__('pathlib').Path({str(gone)!r})")
    assert out["loaded"] and f"because the installed extension {gone} is missing (reinstall shoal)" in out["status"]


def test_no_installed_extension_and_failing_build_runs_the_python_path(tmp_path, silent_compiler):
    out = _fallback("{'built': False, 'reason': 'not built at install: no mpicc found'}", tmp_path / "cache",
                    env={"MPICC": str(silent_compiler)})
    assert not out["loaded"], out
    status = out["status"]
    assert status.startswith("unavailable: not built at install: no mpicc found, and building it on first use failed: ")
    assert f"{silent_compiler} exited with 0 but wrote nothing" in status and "-shared" in status
    assert status.endswith("; using the Python path")


# -- the build step of setup.py ------------------------------------------------------------
def test_setup_without_mpicc_records_why_and_succeeds(tmp_path):
    """No $MPICC, none beside the interpreter, none on PATH: the build goes on without the
    extension and the record says why."""
    lib, temp = tmp_path / "lib", tmp_path / "temp"
    proc = _python(
        f"""
        import runpy, sys
        sys.executable = {str(tmp_path / "bin" / "python")!r}  # an interpreter with no mpicc beside it
        sys.argv = ["setup.py", "--quiet", "build_ext", "--build-lib", {str(lib)!r}, "--build-temp", {str(temp)!r}]
        runpy.run_path("setup.py", run_name="__main__")
        """,
        env={"MPICC": "", "PATH": str(tmp_path / "empty")},
    )
    assert proc.returncode == 0, proc.stderr
    assert "the compiled path was not built at install (no mpicc found" in proc.stderr
    assert not list((lib / "shoal").glob(f"{native.EXTENSION}*"))
    record = (lib / "shoal" / f"{native.RECORD}.py").read_text()
    namespace: dict = {}
    exec(record, namespace)
    assert namespace["CONFIG"]["built"] is False
    assert namespace["CONFIG"]["reason"].startswith("not built at install: no mpicc found ($MPICC is unset")


def test_compile_without_mpicc_names_the_fix(monkeypatch, tmp_path):
    monkeypatch.setattr(native, "find_mpicc", lambda: None)
    with pytest.raises(native.BuildError, match=r"no mpicc found .*set MPICC .* or install the mpich wheel"):
        native.compile_extension(tmp_path / "x.so")


# -- shoal info -----------------------------------------------------------------------------
def test_info_reports_the_installed_extension_and_measured_cuda_awareness(installed):
    proc = subprocess.run([sys.executable, "-m", "shoal", "info"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    rows = _info_rows(proc.stdout)
    assert rows["compiled path"].startswith(f"installed extension {Path(native.__file__).parent}/"), rows
    assert f"built with {installed['mpicc']}" in rows["compiled path"]
    assert f"mpi4py {installed['mpi4py']}" in rows["compiled path"]
    assert "device buffers" not in rows, "a literal string, not a measurement"
    answer = rows["cuda-aware mpi"]
    if installed["mpi_header"].startswith("MPICH") and int(installed["mpi_header"].split()[1].split(".")[0]) >= 4:
        assert re.fullmatch(r"(yes|no) \(MPIX_GPU_query_support\)", answer), answer
    else:
        assert re.fullmatch(r"(yes|no) \(MPIX_Query_cuda_support\)|unknown: this MPI has no query .*", answer), answer


def test_info_without_a_compiled_path_says_cuda_awareness_is_unknown(tmp_path, silent_compiler):
    proc = _python(
        """
        import shoal.native as native
        native.build_config = lambda: {"built": False, "reason": "not built at install: no mpicc found"}
        from shoal.cli import main
        raise SystemExit(main(["info"]))
        """,
        env={"MPICC": str(silent_compiler), "SHOAL_CACHE_DIR": str(tmp_path / "cache")},
    )
    assert proc.returncode == 0, proc.stderr
    rows = _info_rows(proc.stdout)
    assert rows["compiled path"].startswith("unavailable: not built at install: no mpicc found, and building it"), rows
    assert rows["cuda-aware mpi"] == "unknown: the compiled path, which asks the MPI library, is unavailable"


def test_mpi_abi_row_needs_no_get_abi_version():
    """mpi4py 4.0 has no MPI.Get_abi_version; the row must not need it."""
    out = _report(
        """
        import json
        from mpi4py import MPI
        del MPI.Get_abi_version
        from shoal._transport.mpi_library import describe_library
        print(json.dumps(describe_library()))
        """
    )
    assert "extension MPI." in out["mpi abi"] and "MPI standard ABI" not in out["mpi abi"]


@pytest.mark.mpi
def test_every_pe_of_a_job_loads_the_installed_extension(installed, mpi_job):
    job = mpi_job(
        """
        import shoal
        from shoal.native import native_status

        class W(shoal.Chare):
            def status(self):
                return native_status()

        def main(args):
            for s in shoal.Group(W).status(ret=True).get():
                print("status:", s)

        shoal.start(main)
        """
    )
    assert job.returncode == 0, job
    statuses = [ln for ln in job.stdout.splitlines() if ln.startswith("status:")]
    assert len(statuses) == 2 and all(s.startswith("status: installed extension ") for s in statuses), job


@pytest.mark.mpi
def test_a_job_runs_on_the_python_path_when_nothing_compiled_loads(mpi_job, tmp_path, silent_compiler):
    job = mpi_job(
        """
        import shoal
        import shoal.native

        shoal.native.build_config = lambda: {"built": False, "reason": "not built at install: a test says so"}

        class W(shoal.Chare):
            def status(self):
                return shoal.my_pe(), shoal.native.native_status()

        def main(args):
            for pe, status in shoal.Group(W).status(ret=True).get():
                print("pe", pe, status)

        shoal.start(main)
        """,
        env={"MPICC": str(silent_compiler), "SHOAL_CACHE_DIR": str(tmp_path / "cache")},
    )
    assert job.returncode == 0, job
    lines = [ln for ln in job.stdout.splitlines() if ln.startswith("pe ")]
    assert len(lines) == 2, job
    for line in lines:
        assert "unavailable: not built at install: a test says so, and building it on first use failed" in line, job
        assert line.endswith("; using the Python path"), job


# -- metadata ---------------------------------------------------------------------------------
def test_metadata_claims_what_is_tested():
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())
    project = meta["project"]
    assert project["requires-python"] == ">=3.11"  # BaseException.add_note
    assert sys.version_info >= (3, 11)
    assert "Programming Language :: Python :: 3.11" in project["classifiers"]
    requires = meta["build-system"]["requires"]
    names = {re.split(r"[<>=;\s]", r, maxsplit=1)[0] for r in requires}
    assert {"setuptools", "mpi4py", "numpy", "mpich"} <= names
    runtime_mpi4py = next(d for d in project["dependencies"] if d.startswith("mpi4py"))
    assert runtime_mpi4py in requires, "build and run with the same mpi4py floor"


# -- stencil kernels: compiled at run time, once per cache, by many processes at once ---------
_KERNEL_USER = """
    import os, sys, time
    from pathlib import Path
    from shoal.stencil.build import load_kernel
    folder = Path(sys.argv[1])
    (folder / f"ready.{os.getpid()}").touch()
    while not (folder / "go").exists():
        time.sleep(0.01)
    fn = load_kernel(sys.argv[2], reduce=True)
    print(fn(None, None, None, None))
"""


def test_many_processes_compile_a_new_kernel_once(tmp_path):
    cc = shutil.which(os.environ.get("CC") or "cc") or shutil.which("gcc") or shutil.which("clang")
    if cc is None:
        pytest.skip("no C compiler (cc, gcc or clang) to compile stencil kernels with")
    log = tmp_path / "compiles.log"
    wrapper = tmp_path / "cc-logged"
    # A compile (not `cc --version`) is logged and held for a second, so the others
    # arrive while it runs and must wait for it.
    wrapper.write_text(f'#!/bin/sh\ncase " $* " in *" -shared "*) echo "$$ $*" >> {log}; sleep 1;; esac\nexec {cc} "$@"\n')
    wrapper.chmod(0o755)
    seed = time.time_ns() % 1_000_000
    source = (f"double shoal_reduce(void **a, long *b, long *c, long *d) "
              f"{{ (void)a; (void)b; (void)c; (void)d; return {seed}.0; }}\n")
    env = clean_env()
    env.update(SHOAL_CACHE_DIR=str(tmp_path / "cache"), CC=str(wrapper))
    procs = [subprocess.Popen([sys.executable, "-c", textwrap.dedent(_KERNEL_USER), str(tmp_path), source],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
             for _ in range(3)]
    deadline = time.monotonic() + 60
    while len(list(tmp_path.glob("ready.*"))) < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    (tmp_path / "go").touch()
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0], outs
    assert [float(out.strip()) for out, _ in outs] == [float(seed)] * 3, outs
    compiles = log.read_text().splitlines()
    assert len(compiles) == 1, compiles
    assert len(list((tmp_path / "cache" / "stencil").glob("*.so"))) == 1
    assert not list((tmp_path / "cache" / "stencil").glob("*.tmp*")), "a compile left its temporary object behind"


def test_first_use_build_refuses_a_wrapper_of_another_mpi(tmp_path):
    """A machine with two MPIs: mpi4py loaded one, and the mpicc found first belongs to the
    other. Building with it would put a second MPI library in the process; the build is
    refused with both names (and the Python path runs instead)."""
    fake = tmp_path / "mpicc"
    fake.write_text(textwrap.dedent("""\
        #!/bin/sh
        # an Open MPI wrapper, as far as shoal's probe can tell: its probe program says so
        out=""; prev=""
        for a in "$@"; do [ "$prev" = "-o" ] && out="$a"; prev="$a"; done
        printf '#!/bin/sh\\necho "Open MPI 4.1.6 (MPI 3.1)"\\necho "Open MPI v4.1.6, package: elsewhere"\\n' > "$out"
        chmod +x "$out"
        """))
    fake.chmod(0o755)
    with pytest.raises(native.BuildError) as err:
        native._same_abi(str(fake))
    assert "compiles against Open MPI 4.1.6 (MPI 3.1), but mpi4py loaded MPICH" in str(err.value), err.value
    assert "set MPICC" in str(err.value)
    native._same_abi(native.find_mpicc())  # this machine's own wrapper is of its MPI's family


def test_a_failed_first_use_build_is_not_repeated_by_the_pes_waiting_behind_it(tmp_path):
    """The first PE's build fails; the PEs that were waiting on the lock take its word
    (one compiler run, not one per PE), and a later job with the same compiler after the
    failure has stood its time tries again."""
    counter = tmp_path / "runs"
    mpicc = tmp_path / "mpicc"
    mpicc.write_text(f"#!/bin/sh\necho run >> {counter}\necho 'mpicc: broken on purpose' >&2\nexit 1\n")
    mpicc.chmod(0o755)
    code = f"""
        import json, os
        import shoal.compiler as compiler
        import shoal.native as native
        native._same_abi = lambda mpicc: None
        errors = []
        for _ in range(3):  # three PEs, one after another behind the lock
            try:
                native._build_on_first_use()
            except native.BuildError as exc:
                errors.append(str(exc))
        failed = next(compiler.cache_dir().glob("native/*/build.failed"))
        os.utime(failed, (0, 0))  # as if it had failed long ago
        try:
            native._build_on_first_use()
        except native.BuildError as exc:
            errors.append(str(exc))
        print(json.dumps(errors))
    """
    errors = _report(code, {"MPICC": str(mpicc), "SHOAL_CACHE_DIR": str(tmp_path / "cache")})
    assert len(errors) == 4 and all("broken on purpose" in e for e in errors), errors
    assert "failed for another PE" in errors[1] and "failed for another PE" in errors[2], errors
    assert counter.read_text().count("run") == 2, counter.read_text()  # the first PE, then the later job
