"""What ``shoal`` checks of its command line before any PE starts: durations, restart
paths and the ``SHOAL_*`` variables, once in the launcher rather than on every PE; and
whether this process only launches a job (so that it may end without Python's teardown).
"""

from __future__ import annotations

import os
import sys

from .program import check_program
from .settings import SettingsError, load_settings

__all__ = ["duration", "restart_path", "check_settings", "launching", "launcher_only"]


def restart_path(text: str) -> str:
    """``--restart``'s value for the PEs: ``auto`` as it is, a path made absolute."""
    from .lowlevel import RESTART_AUTO

    return text if text == RESTART_AUTO else os.path.abspath(text)


def launching(program: str | None = None) -> bool:
    """This process is about to launch an MPI job (``shoal run``) and will run none of its
    program: check the ``SHOAL_*`` variables every PE will read, and that ``program`` (where
    given) is a Python program, once, here, and let :func:`command` end the process
    without Python's teardown afterwards. False, having said why, where a variable is not
    valid or the program is not Python."""
    global _launcher_only
    if program is not None and os.path.isfile(program) and not check_program("shoal run", program):
        return False
    if not check_settings("run", {k: v for k, v in os.environ.items() if k != "SHOAL_PES"}, transport="mpi"):
        return False
    _launcher_only = True
    return True


def check_settings(command: str, environ: dict[str, str] | None = None, **overrides: object) -> bool:
    """Refuse bad ``SHOAL_*`` values once, in the command that starts the PEs, before any
    PE starts (each would refuse them again); False, having said why."""
    try:
        load_settings(environ, **overrides)
    except SettingsError as exc:
        print(f"shoal {command}: {exc}", file=sys.stderr)
        return False
    return True


_launcher_only = False


def duration(text: str) -> float:
    """``90``, ``90s``, ``5m`` or ``2h`` as seconds (ValueError saying what is wrong)."""
    scale = {"s": 1, "m": 60, "h": 3600}.get(text[-1:], 0)
    try:
        value = float(text[:-1] if scale else text) * (scale or 1)
    except ValueError:
        raise ValueError(f"{text!r} is not a duration such as 60, 60s, 5m or 2h") from None
    if value <= 0:
        raise ValueError(f"{text!r}: a period must be more than 0 seconds")
    return value


def launcher_only() -> bool:
    """Whether :func:`launching` said this process only launches an MPI job and runs none of its program."""
    return _launcher_only
