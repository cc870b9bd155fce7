"""NumPy is imported when a program first uses it, not by shoal's start-up.

``shoal.lazy_numpy.np`` stands in for NumPy until the process imports it: type tests
against ``np.ndarray`` are false, any other attribute imports NumPy, and an import by
anyone links ``np`` and the compiled core to it. tests/programs/late_numpy.py runs a job
under mpiexec that starts without NumPy and then sends arrays every way they travel to a
PE that never imported it.
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


def test_np_links_when_the_program_imports_numpy():
    out = _fresh_python("""
        import sys
        import shoal, shoal.lazy_numpy as lazy
        from shoal.lazy_numpy import np
        assert "numpy" not in sys.modules and not lazy.loaded()
        assert not isinstance(1, np.integer) and np.ndarray.__module__ == "shoal.lazy_numpy"
        seen = []
        lazy.when_loaded(seen.append)
        import numpy
        assert lazy.loaded() and seen == [numpy]
        assert np.ndarray is numpy.ndarray and np.integer is numpy.integer and np.float64 is numpy.float64
        lazy.when_loaded(seen.append)  # once loaded: called at once
        assert seen == [numpy, numpy]
        print("ok")
    """)
    assert out.split() == ["ok"]


def test_a_search_for_numpy_that_imports_nothing_leaves_the_link_armed():
    out = _fresh_python("""
        import importlib.util, sys
        from shoal.lazy_numpy import np, loaded
        assert importlib.util.find_spec("numpy") is not None  # an optional-package check
        assert "numpy" not in sys.modules and not loaded()
        import numpy
        assert loaded() and np.ndarray is numpy.ndarray
        print("ok")
    """)
    assert out.split() == ["ok"]


def test_an_attribute_of_np_imports_numpy():
    out = _fresh_python("""
        import sys
        from shoal.lazy_numpy import np
        a = np.zeros(3)
        import numpy
        assert type(a) is numpy.ndarray and np.ndarray is numpy.ndarray and np.linalg is numpy.linalg
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
