"""The launcher's child process (mpiexec): started by fork and exec as
:class:`subprocess.Popen` starts one, without importing :mod:`subprocess` (threading,
selectors, locale: milliseconds of every job's start).

As Popen does by default, the child gets no descriptor above 2 and the default action
for SIGPIPE and SIGXFSZ (which Python ignores). On Linux it also gets a parent-death
signal: if the launcher is killed outright, the kernel ends mpiexec too.
"""

from __future__ import annotations

import os
import sys
import time

try:  # signal's C core: the module `signal` adds enum and its ~70 members, milliseconds of every job's start (shoal.launcher)
    import _signal as signal
except ImportError:  # not CPython
    import signal  # type: ignore[no-redef]

TYPE_CHECKING = False  # typing is for type checkers: the launcher skips its import
if TYPE_CHECKING:
    from typing import Callable

__all__ = ["Process", "TimeoutExpired"]


class TimeoutExpired(Exception):
    """:meth:`Process.wait` gave up: the process is still running."""


class Process:
    """A running child: ``pid``, and ``returncode`` once it ended (``-N``: killed by signal N)."""

    __slots__ = ("pid", "returncode")

    def __init__(self, argv: list[str], env: dict[str, str], death_signal: int = 0, outputs: tuple = (-1, -1)):
        """Run ``argv[0]`` (a path) with arguments ``argv`` and environment ``env``; an
        :class:`OSError` naming ``argv[0]`` if it cannot be started. ``death_signal``:
        the signal it gets when this process dies (Linux; 0: none); ``outputs``: the
        descriptors that become its stdout and stderr (-1: this process's own)."""
        in_child = _parent_death(death_signal) if death_signal else None
        report_r, report_w = os.pipe()  # not inherited: exec closes the child's end, and the read sees EOF
        pid = os.fork()
        if pid == 0:  # the child, until exec
            try:
                os.close(report_r)
                for fd, target in zip(outputs, (1, 2)):
                    if fd >= 0:
                        os.dup2(fd, target)
                _reset(keep=report_w)
                if in_child is not None:
                    in_child()
                os.execve(argv[0], argv, env)
            except BaseException as exc:  # noqa: BLE001 - reported to the parent, which raises it
                os.write(report_w, f"{getattr(exc, 'errno', None) or 0}:{exc}".encode(errors="replace"))
            finally:
                os._exit(127)
        os.close(report_w)
        try:
            report = b""
            while chunk := os.read(report_r, 4096):
                report += chunk
        finally:
            os.close(report_r)
        if report:
            os.waitpid(pid, 0)
            number, _, text = report.decode(errors="replace").partition(":")
            code = int(number)
            raise OSError(code, os.strerror(code) if code else text, argv[0])
        self.pid = pid
        self.returncode: int | None = None

    def poll(self) -> int | None:
        """The exit code if the process ended, else None."""
        if self.returncode is None:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        """Wait for the process to end (:class:`TimeoutExpired` after ``timeout`` seconds); its exit code."""
        if timeout is None:
            if self.returncode is None:
                self.returncode = os.waitstatus_to_exitcode(os.waitpid(self.pid, 0)[1])
            return self.returncode
        end, pause = time.monotonic() + timeout, 0.0005
        while (code := self.poll()) is None:
            left = end - time.monotonic()
            if left <= 0:
                raise TimeoutExpired(f"process {self.pid} still runs after {timeout} s")
            time.sleep(min(pause, left))
            pause = min(2 * pause, 0.05)
        return code

    def send_signal(self, sig: int) -> None:
        """Send ``sig``, unless the process already ended (its pid may be another's by now)."""
        if self.poll() is None:
            os.kill(self.pid, sig)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


def _reset(keep: int) -> None:
    """In the child: close every descriptor above 2 but ``keep``; default SIGPIPE and SIGXFSZ."""
    try:
        fds = [int(name) for name in os.listdir("/proc/self/fd")]
    except OSError:  # no /proc: every possible descriptor
        fds = list(range(3, os.sysconf("SC_OPEN_MAX") if hasattr(os, "sysconf") else 1024))
    for fd in fds:
        if fd > 2 and fd != keep:
            try:
                os.close(fd)
            except OSError:
                pass
    for sig in (signal.SIGPIPE, signal.SIGXFSZ):
        signal.signal(sig, signal.SIG_DFL)


def _parent_death(sig: int) -> Callable[[], None] | None:
    """Linux: what the child runs to have the kernel send it ``sig`` when this process dies
    (even by SIGKILL); None where that cannot be had."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes

        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    parent = os.getpid()

    def in_child() -> None:
        prctl(1, int(sig), 0, 0, 0)  # PR_SET_PDEATHSIG
        if os.getppid() != parent:  # the parent died before the line above
            os.kill(os.getpid(), sig)

    return in_child
