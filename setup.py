"""Build shoal's compiled per-message path at install time, as mpi4py builds: with the MPI's compiler wrapper.

The project's metadata is all in pyproject.toml; this file adds the extension module
``shoal._shoal_native`` and the step that builds it. The step never fails the install:
with no mpicc, or a compiler that fails, it records why in ``shoal/_native_build.py``
and shoal builds the extension on first use instead (or runs its Python path), saying
why in ``shoal info``. The compiler is found as at run time: ``$MPICC``, the one
mpi4py's ``get_config()`` names, beside the installing Python, then on PATH (where pip's
build environment puts the ``mpich`` wheel's mpicc first: set MPICC, or install with
``--no-build-isolation``, to build against a system MPI).
"""

from __future__ import annotations

import importlib
import os
import shutil
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = Path(__file__).resolve().parent


def _native() -> ModuleType:
    """shoal.native from these sources: the package's ``__init__`` and the build's modules
    (native, compiler, settings) import the standard library only, and the build
    environment has mpi4py and NumPy for the include paths."""
    sys.path.insert(0, str(HERE / "src"))
    try:
        return importlib.import_module("shoal.native")
    finally:
        sys.path.remove(str(HERE / "src"))


native = _native()


class BuildNative(build_ext):
    """Compile the extension with mpicc, record how (or why not), never fail the install."""

    def build_extension(self, ext: Extension) -> None:
        """Build ``ext`` into the build directory and write the build record beside it."""
        target = Path(self.get_ext_fullpath(ext.name))
        target.parent.mkdir(parents=True, exist_ok=True)
        config: dict[str, Any]
        mpicc, found = native.locate_mpicc() or (None, "")
        try:
            command = native.compile_extension(target, mpicc)
            config = native.describe_build(mpicc, command, found)
        except Exception as exc:  # noqa: BLE001 - the install goes on; the record says why
            target.unlink(missing_ok=True)
            config = {"built": False, "reason": f"not built at install: {exc}"}
            print(f"shoal: the compiled path was not built at install ({exc}); shoal will build it on first use "
                  "or run its Python path", file=sys.stderr)
        native.write_record(target.parent, config)

    def copy_extensions_to_source(self) -> None:
        """Editable installs: bring the record along with the extension, and remove an
        extension left by an earlier install when this one built none."""
        super().copy_extensions_to_source()
        build_py = self.get_finalized_command("build_py")
        built = Path(self.build_lib) / "shoal"
        source = Path(build_py.get_package_dir("shoal"))
        shutil.copyfile(built / f"{native.RECORD}.py", source / f"{native.RECORD}.py")
        for ext in self.extensions:
            name = os.path.basename(self.get_ext_filename(self.get_ext_fullname(ext.name)))
            if not (built / name).exists():
                (source / name).unlink(missing_ok=True)


setup(
    ext_modules=[
        Extension(
            f"shoal.{native.EXTENSION}",
            sources=[os.path.relpath(os.path.realpath(p), HERE) for p in native.SOURCES],
            depends=[os.path.relpath(os.path.realpath(p), HERE) for p in native.HEADERS],
            optional=True,
        )
    ],
    cmdclass={"build_ext": BuildNative},
)
