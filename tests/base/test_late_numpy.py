"""NumPy is imported when a program first uses it, not by shoal's start-up.

No array exists before the process imports NumPy, so shoal's type tests look at
``sys.modules`` (``shoal.numpy_types``) and its modules import NumPy where they call it;
the compiled core loads NumPy's C API at its first array test after NumPy's import. Nothing
hooks the import system. tests/programs/late_numpy.py runs a job under mpiexec that starts
without NumPy and then sends arrays every way they travel to a PE that never imported it.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
from support.commands import clean_env
from support import PROGRAMS

PROGRAM = PROGRAMS / "late_numpy.py"


def _fresh_python(code: str) -> str:
    """Run ``code`` in a new interpreter (this one has NumPy already); its stdout."""
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_the_type_tests_say_no_until_numpy_is_imported_and_import_nothing():
    out = _fresh_python("""
        import sys
        from shoal.numpy_types import Never, integer, ndarray
        assert ndarray() is Never and integer() is Never
        assert isinstance(3, (int, integer())) and not isinstance(b"", ndarray())
        assert "numpy" not in sys.modules
        import numpy
        assert ndarray() is numpy.ndarray and integer() is numpy.integer
        print("ok")
    """)
    assert out.split() == ["ok"]


def test_shoal_and_its_message_path_load_without_numpy_or_an_import_hook():
    out = _fresh_python("""
        import sys
        import shoal
        from shoal import *  # every public name, and the modules that define them
        from shoal._runtime import channels, message, receiving, reducers, runtime, sending, strategy_registry
        from shoal import native
        native.load_native()
        assert "numpy" not in sys.modules, "importing shoal imported NumPy"
        hooks = [f for f in sys.meta_path if getattr(f, "__module__", "").startswith("shoal")]
        assert not hooks, f"shoal hooks the import system: {hooks}"
        assert message.encode_call((1, "two", [3.0]), None)[0] == 0
        assert "numpy" not in sys.modules, "a message without arrays imported NumPy"
        print("ok")
    """)
    assert out.split() == ["ok"]


def test_the_compiled_core_takes_arrays_once_numpy_is_imported():
    out = _fresh_python("""
        import sys
        from shoal.native import load_native
        core = load_native()
        if core is None:
            print("no compiled core"); raise SystemExit
        assert "numpy" not in sys.modules
        try:
            core.describe(b"not an array")
        except TypeError:
            pass
        assert "numpy" not in sys.modules, "the compiled core's array test imported NumPy"
        import numpy as np
        from shoal._runtime.message import _describe
        a = np.arange(6.0).reshape(2, 3)
        assert core.describe(a) == _describe(((a.dtype, a.shape),))
        print("ok")
    """)
    if out.strip() == "no compiled core":
        pytest.skip("the compiled core is not available here (shoal info says why)")
    assert out.split() == ["ok"]


@pytest.mark.mpi
@pytest.mark.parametrize("native", ["1", "0"], ids=["native", "python"])
def test_a_job_starts_without_numpy_and_takes_arrays_after_a_late_import(native):
    environ = clean_env()
    environ["SHOAL_NATIVE"] = native
    proc = subprocess.run([sys.executable, "-m", "shoal", "run", "-n", "2", str(PROGRAM)], capture_output=True,
                          text=True, timeout=120, env=environ, cwd=PROGRAM.parent)
    report = f"exit code {proc.returncode}\n--- stdout\n{proc.stdout}\n--- stderr\n{proc.stderr}"
    assert proc.returncode == 0, report
    assert proc.stdout.strip().splitlines() == [
        "no NumPy at start-up: ok", "arrays after a late import: ok", "late numpy: OK"], report
