"""Compiled parts of shoal: the extension ``pip install`` built, else one built on first use.

``pip install`` (and ``pip install -e .``) compiles ``_native/*.c`` with the MPI's own
compiler wrapper into the extension module ``shoal._shoal_native`` and records how, in
the generated module ``shoal._native_build`` (:func:`build_config`). At load that record
is checked against this process: the C sources, mpi4py, the MPI library and NumPy must
be those it was built with. Where they are not, or the install found no compiler, the
extension is compiled once per (source, Python, mpi4py, MPI library) into a cache
directory and loaded from there (through :func:`shoal.compiler.cached_build`: PEs starting
together wait on a file lock instead of all compiling); where that fails too, the
pure-Python path runs. :func:`native_status` (``shoal info``) says which of the three is in
use and why.

``setup.py`` imports this module to build at install time, so its top level and the
package's ``__init__`` import the standard library only.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import importlib.util
import os
import sys
from types import ModuleType
import zlib

from .compiler import BuildError, run_compiler

TYPE_CHECKING = False  # typing is for type checkers: a PE's start-up skips its import
if TYPE_CHECKING:  # pathlib, subprocess and the like are imported where a build needs them:
    from pathlib import Path  # every PE loads this module at start-up, and builds are rare
    from typing import Any

__all__ = [
    "load_native", "native_status", "build_config", "find_mpicc", "locate_mpicc", "BuildError",
    "compile_extension", "describe_build", "write_record", "source_digest", "EXTENSION", "RECORD", "CFLAGS",
    "SOURCES", "HEADERS", "fresh_load",
]

_PACKAGE = os.path.dirname(os.path.abspath(__file__))
_FOLDER = os.path.join(_PACKAGE, "_native")
#: the paths of the C files of the extension (one module), and of the headers they include
SOURCES = [os.path.join(_FOLDER, name) for name in ("frames.c", "frames_trace.c", "core.c", "send.c", "simple_pickle.c", "receive.c", "channels.c", "sets.c", "proxies.c", "tasks.c", "exchange.c", "broadcasts.c", "contribute.c", "partials.c", "results.c", "trace.c", "contract.c", "query.c")]
HEADERS = sorted(os.path.join(_FOLDER, name) for name in os.listdir(_FOLDER) if name.endswith(".h"))
#: the extension's module name in the package (frames.c defines its PyInit__shoal_native)
EXTENSION = "_shoal_native"
#: the generated module beside the installed extension that records how it was built
RECORD = "_native_build"
#: what the MPI compiler wrapper is given besides the include directories and sources
CFLAGS = ("-O2", "-shared", "-fPIC", "-Wall")
#: seconds the compiler may take before the build is given up (and the Python path used)
BUILD_TIMEOUT = 600.0
#: seconds a failed first-use build stands for the PEs that start after it: the PEs of
#: one job (32 at once, say) take its word instead of each failing in turn behind the
#: lock, while a job started later (the compiler fixed) tries again
FAILURE_STANDS = 300.0
_status = "not loaded"
_module: ModuleType | None = None


def find_mpicc() -> str | None:
    """The MPI C compiler wrapper: ``$MPICC``, the one mpi4py's ``get_config()`` names
    (where its packager recorded one), beside this Python, then on PATH."""
    found = locate_mpicc()
    return found[0] if found else None


def locate_mpicc() -> tuple[str, str] | None:
    """``(path, where it was found)`` of :func:`find_mpicc`'s wrapper, or None."""
    candidates = [("$MPICC", os.environ.get("MPICC") or "")]
    try:
        import mpi4py

        candidates.append(("mpi4py.get_config()", str(mpi4py.get_config().get("mpicc", ""))))
    except ImportError:
        pass
    candidates += [(f"beside {sys.executable}", os.path.join(os.path.dirname(sys.executable), "mpicc")),
                   ("PATH", "mpicc")]
    import shutil

    for where, candidate in candidates:
        path = shutil.which(candidate) if candidate else None
        if path:
            return path, where
    return None


def source_digest() -> str:
    """A fingerprint of the C sources and headers (CRC-32 and Adler-32 of their names and
    bytes): a build of other sources is not this one. zlib rather than hashlib: every PE
    checks it at start-up, and hashlib's OpenSSL takes milliseconds to load."""
    crc, adler = 0, 1
    for path in SOURCES + HEADERS:
        with open(path, "rb") as f:
            data = os.path.basename(path).encode() + b"\0" + f.read()
        crc, adler = zlib.crc32(data, crc), zlib.adler32(data, adler)
    return f"{crc:08x}{adler:08x}"


def _key(mpicc: str | None) -> list[str]:
    """What the first-use build depends on: the sources, Python, mpi4py, the MPI library, NumPy and the wrapper."""
    import mpi4py
    from mpi4py import MPI

    return [source_digest(), sys.version, mpi4py.__version__, MPI.Get_library_version(), str(MPI.__file__),
            _numpy_version(), str(mpicc)]


def _compile_command(mpicc: str, output: Path) -> list[str]:
    """One wrapper call compiles and links every source against Python, mpi4py and NumPy."""
    import sysconfig

    import mpi4py
    import numpy

    return [
        mpicc, *CFLAGS,
        f"-I{sysconfig.get_paths()['include']}", f"-I{mpi4py.get_include()}", f"-I{numpy.get_include()}",
        *SOURCES, "-o", str(output),
    ]


_NO_MPICC = (f"no mpicc found ($MPICC is unset, mpi4py.get_config() names none, none beside {sys.executable}, "
             "none on PATH): set MPICC to your MPI's compiler wrapper or install the mpich wheel (pip install mpich)")


def compile_extension(target: Path, mpicc: str | None = None) -> list[str]:
    """Compile the extension into ``target`` (atomically: a temporary file, then a
    rename) with ``mpicc`` (default :func:`find_mpicc`); returns the command that ran."""
    mpicc = mpicc or find_mpicc()
    if mpicc is None:
        raise BuildError(_NO_MPICC)
    tmp = target.with_suffix(f".{os.getpid()}.tmp")
    cmd = _compile_command(mpicc, tmp)
    run_compiler(cmd, tmp, BUILD_TIMEOUT)
    os.replace(tmp, target)
    return cmd


def describe_build(mpicc: str, command: list[str], found: str = "") -> dict[str, Any]:
    """The facts of a build by ``mpicc`` for the record: versions of Python, mpi4py and
    NumPy, the MPI header and library it compiled against (from a probe program built
    with the same wrapper), and what the wrapper runs."""
    import mpi4py
    import numpy

    header, library = _probe(mpicc)
    return {
        "built": True,
        "mpicc": mpicc,
        "mpicc_found": found,
        "mpicc_runs": _wrapped(mpicc),
        "flags": list(CFLAGS),
        "command": command,
        "python": sys.version.split()[0],
        "mpi4py": mpi4py.__version__,
        "numpy": numpy.__version__,
        "mpi_header": header,
        "mpi_library": library,
        "sources": source_digest(),
    }


def _probe(mpicc: str) -> tuple[str, str | None]:
    """``(header, library version)`` of the MPI behind ``mpicc``: query.c built as a
    program and run (the library is None where the program cannot run here)."""
    import subprocess
    import tempfile

    with tempfile.TemporaryDirectory(prefix="shoal-probe-") as tmp:
        exe = os.path.join(tmp, "probe")
        cmd = [mpicc, "-DSHOAL_QUERY_MAIN", os.path.join(_FOLDER, "query.c"), "-o", exe]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=BUILD_TIMEOUT)
        except (OSError, subprocess.SubprocessError) as exc:
            raise BuildError(f"{mpicc} could not be run: {exc}") from None
        if proc.returncode != 0:
            raise BuildError(f"{' '.join(cmd)} failed (exit code {proc.returncode}):\n{proc.stderr.strip()}")
        try:
            run = subprocess.run([exe], capture_output=True, text=True, timeout=60)
        except (OSError, subprocess.SubprocessError):
            return "unknown", None
        if run.returncode != 0:
            return "unknown", None
        header, _, library = run.stdout.partition("\n")
        return header.strip(), library.strip()


def _wrapped(mpicc: str) -> str:
    """The command line the wrapper runs (MPICH: ``-show``; Open MPI: ``--showme``)."""
    import subprocess

    for flag in ("-show", "--showme"):
        try:
            proc = subprocess.run([mpicc, flag], capture_output=True, text=True, timeout=60)
        except (OSError, subprocess.SubprocessError):
            continue
        if proc.returncode == 0 and proc.stdout.strip():
            return proc.stdout.strip()
    return "unknown"


def write_record(folder: Path, config: dict[str, Any]) -> Path:
    """Write the build record ``config`` as the module ``RECORD`` in ``folder``."""
    import pprint

    path = folder / f"{RECORD}.py"
    path.write_text(
        '"""How the install built shoal\'s compiled per-message path (generated by setup.py; do not edit)."""\n\n'
        '__all__ = ["CONFIG"]\n\n'
        f"CONFIG: dict = {pprint.pformat(config, width=100, sort_dicts=False)}\n"
    )
    return path


def build_config() -> dict[str, Any]:
    """What the install recorded about building the extension: how it was built
    (``built`` True: compiler, flags, versions) or why it was not (``reason``)."""
    try:
        record = importlib.import_module(f"{__package__ or 'shoal'}.{RECORD}")
    except ImportError:
        return {"built": False, "reason": "no extension was built at install (there is no build record "
                f"{os.path.join(_PACKAGE, RECORD + '.py')}: reinstall with `pip install -e .` or `make`)"}
    return dict(record.CONFIG)


def _installed() -> str:
    """Where the install put the extension: beside this file, as setuptools names it."""
    return os.path.join(_PACKAGE, EXTENSION + importlib.machinery.EXTENSION_SUFFIXES[0])


def _mismatch(config: dict[str, Any]) -> str | None:
    """Why the installed extension cannot serve this process, or None if it can."""
    import mpi4py
    from mpi4py import MPI

    if not config.get("built"):
        return str(config.get("reason", "the install did not build it (no reason recorded)"))
    path = _installed()
    if not os.path.isfile(path):
        return f"the installed extension {path} is missing (reinstall shoal)"
    if config.get("sources") != source_digest():
        return "the C sources changed since the install built it (rerun `pip install -e .` or `make`)"
    if config.get("mpi4py") != mpi4py.__version__:
        return (f"the installed extension was built against mpi4py {config.get('mpi4py')}, "
                f"this is mpi4py {mpi4py.__version__}")
    built_library = config.get("mpi_library")
    library = MPI.Get_library_version().strip()
    if built_library is None:
        return ("the install could not run its MPI probe, so the MPI library the extension was built against is "
                "unknown")
    if built_library != library:
        return (f"the installed extension was built against another MPI library ({_first_line(built_library)}; "
                f"this process uses {_first_line(library)})")
    numpy = _numpy_version()
    if int(str(config.get("numpy", "0")).split(".")[0]) < int(numpy.split(".")[0]):
        return f"the installed extension was built against NumPy {config.get('numpy')}, too old for NumPy {numpy}"
    return None


def _numpy_version() -> str:
    """The installed NumPy's version, read from its ``version.py`` without importing NumPy
    (a PE imports it only if its program does: :mod:`shoal.numpy_types`)."""
    if "numpy" in sys.modules:
        return str(sys.modules["numpy"].__version__)
    spec = importlib.util.find_spec("numpy")
    try:
        assert spec is not None and spec.submodule_search_locations
        with open(os.path.join(spec.submodule_search_locations[0], "version.py")) as f:
            for line in f:
                name, _, value = line.partition("=")
                if name.strip() == "version":
                    return value.strip().strip("\"'")
    except (OSError, AssertionError):
        pass
    import numpy  # an unusual install: ask the module itself

    return str(numpy.__version__)


def _first_line(text: object) -> str:
    """The first line of a library version string (the rest is configure flags)."""
    return str(text).strip().splitlines()[0].strip() if str(text).strip() else "unknown"


def _describe(config: dict[str, Any]) -> str:
    """``built with ...`` for the status line."""
    runs = str(config.get("mpicc_runs", "")).split()
    under = f" → {runs[0]}" if runs and runs[0] != "unknown" else ""
    return (f"built with {config.get('mpicc')}{under} {' '.join(config.get('flags', []))} against "
            f"{config.get('mpi_header')}, mpi4py {config.get('mpi4py')}, numpy {config.get('numpy')}")


def _load(path: str | Path, name: str) -> ModuleType:
    """Import the extension at ``path`` by file, not by search path (it is checked first)."""
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _build_on_first_use() -> Path:
    """Compile the extension into the cache (once: concurrent callers wait on a lock; a
    build that failed is not tried again by the PEs waiting behind it)."""
    from .compiler import cached_build

    mpicc = find_mpicc()

    def command(output: Path, source: Path | None) -> list[str]:
        if mpicc is None:
            raise BuildError(_NO_MPICC)
        _same_abi(mpicc)
        return _compile_command(mpicc, output)

    return cached_build("native", _key(mpicc), command, name=EXTENSION + importlib.machinery.EXTENSION_SUFFIXES[0],
                        timeout=BUILD_TIMEOUT, failure_stands=FAILURE_STANDS)


def _abi_family(text: str) -> str | None:
    """``"Open MPI"`` or ``"MPICH"`` (MPICH and its derivatives share one ABI) for an MPI
    header or library version string, or None where it says neither."""
    if "Open MPI" in text:
        return "Open MPI"
    return "MPICH" if "MPICH" in text or "Intel(R) MPI" in text or "MVAPICH" in text else None


def _same_abi(mpicc: str) -> None:
    """Refuse to build with a wrapper of another MPI family than the library mpi4py
    loaded: the extension would bring a second MPI library into the process (on a
    machine with both, say, the image's Open MPI loaded and the mpich wheel's mpicc first
    on PATH), which crashes at the first call."""
    from mpi4py import MPI

    header, _ = _probe(mpicc)
    loaded = MPI.Get_library_version()
    built, used = _abi_family(header), _abi_family(loaded)
    if built is not None and used is not None and built != used:
        raise BuildError(f"{mpicc} compiles against {header}, but mpi4py loaded {_first_line(loaded)}: "
                         "set MPICC to the compiler wrapper of the MPI that mpi4py uses")


def load_native() -> ModuleType | None:
    """The compiled module, or None (the reason is in :func:`native_status`)."""
    global _status, _module
    if _module is not None:
        return _module
    try:
        from mpi4py import MPI  # noqa: F401 - the MPI library is loaded before the extension that links it
    except Exception as exc:  # noqa: BLE001 - mpi4py raises RuntimeError when no MPI library loads
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        _status = f"unavailable: mpi4py's MPI module does not load ({first}), using the Python path"
        return None
    config = build_config()
    try:
        why = _mismatch(config)
    except Exception as exc:  # noqa: BLE001 - a damaged record means: do not trust the installed extension
        why = f"the install's build record could not be checked ({type(exc).__name__}: {exc})"
    if why is None:
        path = _installed()
        try:
            _module = _load(path, f"{__package__ or 'shoal'}.{EXTENSION}")
        except Exception as exc:  # noqa: BLE001 - any failure means: build it here instead
            why = f"the installed extension {path} did not load ({type(exc).__name__}: {exc})"
        else:
            _status = f"installed extension {path} ({_describe(config)})"
            return _module
    try:
        target = _build_on_first_use()
        module = _load(target, EXTENSION)
    except Exception as exc:  # noqa: BLE001 - any failure means: use the Python path
        _status = f"unavailable: {why}, and building it on first use failed: {exc}; using the Python path"
        return None
    _status = f"built on first use in {target} because {why}"
    _module = module
    return module


def native_status() -> str:
    """What :func:`load_native` did, for ``shoal info``."""
    return _status


def fresh_load() -> Any:
    """New load counters of an element, zero (what a pickled ``Load`` comes back as)."""
    module = load_native()
    if module is not None:
        return module.Load()
    import numpy as np

    return np.zeros(2)
