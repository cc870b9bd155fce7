"""What the tests share: paths, jobs to run, and the stand-ins for what a machine lacks.

The tests live in folders that mirror shoal's layers (base, transport, native, runtime,
jobs, pool, stencil, compat, remote, trace, bench, cli, project); everything two of them
use is here, imported as ``support.<module>`` (``tests/`` is on ``sys.path``: pytest puts
the folder of the root conftest.py there, and a program a test starts puts :data:`TESTS`).
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["TESTS", "ROOT", "PROGRAMS", "EXAMPLES", "SRC", "SHARED"]

#: the tests' root folder (what a program a test starts puts on sys.path to import support)
TESTS = Path(__file__).resolve().parent.parent
#: the checkout
ROOT = TESTS.parent
#: programs that several tests run under mpiexec
PROGRAMS = TESTS / "programs"
EXAMPLES = ROOT / "examples"
#: the package's sources
SRC = ROOT / "src" / "shoal"
#: ../shared beside the checkout (the Charm4py suite, the reliability probes)
SHARED = ROOT.parent / "shared"
