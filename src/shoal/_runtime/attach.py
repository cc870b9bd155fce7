"""Start a shoal job from the middle of a script: :func:`attach` and :func:`detach`.

:func:`shoal.start` wants the whole program as one function. A script written as plain
top-level code (a CharmStencil program, a notebook) can instead call ``shoal.attach()``
where it first needs the job:

* under ``shoal run -n N`` (or any MPI launcher) every process starts its PE there;
  PE 0 returns and goes on running the script, the other PEs serve messages until the
  job ends and then leave the process with the job's exit code — so code before the
  call runs on every PE, code after it on PE 0 only;
* under plain ``python prog.py`` the job's PEs (``SHOAL_PES``, 1 by default) are
  in-process, stepped whenever the script waits on a future.

The job ends with :func:`detach`, or when the script ends (an ``atexit`` hook). An
exception that escapes the script on PE 0 ends the whole MPI job, as in
:func:`shoal.start`.
"""

from __future__ import annotations

import atexit
import sys
from types import TracebackType
from typing import Any

from ..errors import NotRunningError, ShoalError
from .context import current, set_current
from .engine import Engine, MPIEngine, open_engine

__all__ = ["attach", "detach"]


class _Attached:
    """The job this process attached to: its engine and PE 0's runtime."""

    __slots__ = ("engine", "rt0", "previous_hook", "failed")

    def __init__(self, engine: Engine):
        self.engine = engine
        self.rt0 = engine.runtimes[0]
        self.previous_hook = sys.excepthook
        self.failed = False


_attached: _Attached | None = None


def attach(**options: Any) -> int:
    """Start (or join) this script's shoal job here; return this PE's number.

    ``options`` override settings as in :func:`shoal.run` (``pes=3``,
    ``transport="inproc"``). Inside a running program (``shoal.start``, or after an
    earlier ``attach``) it only returns the PE number. Under MPI only PE 0 returns: the
    other PEs serve until the job ends, then exit the process."""
    global _attached
    try:
        return current("shoal.attach()").pe
    except NotRunningError:
        pass
    from ..settings import load_settings

    engine = open_engine(load_settings(**options))
    if engine.runtimes[0].pe != 0:  # under MPI: serve as backend until the job ends
        code = engine.run_main(lambda args: None, [])
        engine.close()
        raise SystemExit(code)
    a = _attached = _Attached(engine)
    set_current(a.rt0)
    sys.excepthook = _hook
    atexit.register(_at_exit)
    return 0


def detach(code: int = 0) -> None:
    """End the attached job on every PE with exit code ``code`` (PE 0 only).

    Called by itself when the script ends; does nothing if no job is attached. Under
    MPI a process cannot attach again afterwards (MPI starts once per process)."""
    global _attached
    a = _attached
    if a is None:
        return
    if current("shoal.detach()") is not a.rt0:
        raise ShoalError("shoal.detach() ends the job attached by shoal.attach(); call it from the script on PE 0")
    _attached = None
    atexit.unregister(_at_exit)
    sys.excepthook = a.previous_hook
    engine = a.engine
    try:
        a.rt0.request_exit(code)
        engine.run_until(lambda: all(rt.stopped for rt in engine.runtimes))
    except BaseException as exc:  # noqa: BLE001 - any failure here ends the whole job
        engine.fatal(a.rt0, exc, "the shoal runtime")
    finally:
        set_current(None)
    engine.close()


def _at_exit() -> None:
    a = _attached
    if a is not None and not a.failed:
        detach(0)


def _hook(tp: type[BaseException], exc: BaseException, tb: TracebackType | None) -> None:
    """An exception escaped the script: under MPI it ends every PE, with its traceback."""
    a = _attached
    if a is None:
        sys.__excepthook__(tp, exc, tb)
        return
    a.failed = True
    if isinstance(a.engine, MPIEngine):
        a.engine.fatal(a.rt0, exc.with_traceback(tb), "the main program")
    a.previous_hook(tp, exc, tb)
