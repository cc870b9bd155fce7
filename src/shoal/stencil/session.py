"""A shoal job for scripts that never call ``shoal.start``.

A CharmStencil-style script is plain top-level code: ``grid = Jacobi2D(n, None);
grid.solve(1000)``. When its first stencil is created outside a running shoal
program, :func:`ensure_runtime` starts the job in place: under ``shoal run -n N`` (or
any MPI launcher) PE 0 goes on running the script as the frontend while every other
PE serves as backend until the script ends; under plain ``python prog.py`` the PEs
(``SHOAL_PES``, 1 by default) live in this process. Code before the first stencil runs
on every PE, code after it on PE 0 only.

This mirrors :func:`shoal.run` (which wants the whole program as one function); a
runtime-level ``attach`` would let this module stop building engines itself.
"""

from __future__ import annotations

import atexit
import sys
from typing import Any

from ..errors import NotRunningError
from ..runtime.context import current, set_current

__all__ = ["ensure_runtime"]

_engine: Any = None


def ensure_runtime() -> None:
    """Make sure a shoal runtime is running on this PE (start the job if not)."""
    try:
        current("shoal.stencil")
        return
    except NotRunningError:
        pass
    _attach()


def _attach() -> None:
    global _engine
    from ..runtime.engine import Engine, MPIEngine, under_mpi_launcher
    from ..settings import load_settings

    settings = load_settings()
    transport = settings.transport or ("mpi" if under_mpi_launcher() else "inproc")
    closer = None
    if transport == "mpi":
        from ..transport.mpi import MPITransport

        t = MPITransport(settings.rendezvous_threshold, settings.frame_capacity, native=bool(settings.native))
        engine: Engine = MPIEngine([t], settings)
        t.barrier()
        if engine.runtimes[0].pe != 0:
            code = engine.run_main(lambda args: None, [])  # serve as backend until the job ends
            t.close()
            raise SystemExit(code)
        closer = t.close
    else:
        from ..transport.inproc import InprocHub

        hub = InprocHub(settings.pes, settings.rendezvous_threshold)
        engine = Engine(hub.transports, settings)
    _engine = engine
    rt0 = engine.runtimes[0]
    set_current(rt0)
    previous_hook = sys.excepthook
    failed = []

    def hook(tp: type, exc: BaseException, tb: Any) -> None:
        failed.append(exc)
        if isinstance(engine, MPIEngine):
            engine.fatal(rt0, exc.with_traceback(tb), "the main program")
        previous_hook(tp, exc, tb)

    def finish() -> None:
        if failed:
            return
        set_current(rt0)
        rt0.request_exit(0)
        engine._serve(lambda: all(rt.stopped for rt in engine.runtimes))
        if closer is not None:
            closer()

    sys.excepthook = hook
    atexit.register(finish)
