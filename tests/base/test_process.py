"""shoal.process: the launcher's child process, started as subprocess.Popen starts one
(exit codes, a missing program, descriptors, signal dispositions, the parent-death
signal). Every timeout here is a hang guard, never a measurement."""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import time

import pytest

from shoal.process import Process, TimeoutExpired

HANG_GUARD = 30
SH = "/bin/sh"


def test_exit_codes_as_popen_reports_them():
    assert Process([SH, "-c", "exit 3"], dict(os.environ)).wait(HANG_GUARD) == 3
    assert Process([SH, "-c", "kill -TERM $$"], dict(os.environ)).wait(HANG_GUARD) == -signal.SIGTERM


def test_poll_is_none_while_it_runs_then_the_signal_that_ended_it():
    proc = Process(["/bin/sleep", "300"], dict(os.environ))
    try:
        assert proc.poll() is None
        with pytest.raises(TimeoutExpired):
            proc.wait(0.05)
    finally:
        proc.kill()
    assert proc.wait(HANG_GUARD) == -signal.SIGKILL
    assert proc.poll() == -signal.SIGKILL
    proc.send_signal(signal.SIGTERM)  # ended: nothing is sent to a pid another process may have now


def test_a_missing_program_is_an_oserror_naming_it(tmp_path):
    missing = str(tmp_path / "no-such-mpiexec")
    with pytest.raises(OSError) as info:
        Process([missing], dict(os.environ))
    assert info.value.errno == errno.ENOENT and info.value.filename == missing
    plain = tmp_path / "not-executable"
    plain.write_text("#!/bin/sh\n")
    with pytest.raises(PermissionError):
        Process([str(plain)], dict(os.environ))


def test_the_child_gets_the_environment_given_and_no_other_descriptor(tmp_path):
    out = tmp_path / "out"
    inherited = os.open(os.devnull, os.O_RDONLY)
    os.set_inheritable(inherited, True)  # passed on by the launcher's own parent, say
    try:
        script = f"echo $ONLY_THIS; ls /proc/self/fd > {out}.fds; exec >{out}; echo done"
        assert Process([SH, "-c", script], {"ONLY_THIS": "yes", "PATH": os.defpath}).wait(HANG_GUARD) == 0
    finally:
        os.close(inherited)
    fds = {int(n) for n in (tmp_path / "out.fds").read_text().split()}
    assert fds <= {0, 1, 2, 3}, fds  # 3: ls's own listing of the folder


def test_sigpipe_and_sigxfsz_are_back_to_their_default_in_the_child(tmp_path):
    status = tmp_path / "status"
    assert Process([SH, "-c", f"exec cat /proc/self/status > {status}"], dict(os.environ)).wait(HANG_GUARD) == 0
    ignored = int(next(ln for ln in status.read_text().splitlines() if ln.startswith("SigIgn:")).split()[1], 16)
    for sig in (signal.SIGPIPE, signal.SIGXFSZ):  # Python ignores both; mpiexec and the PEs must not inherit that
        assert not ignored & (1 << (sig - 1)), f"{sig.name} is ignored in the child"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the parent-death signal is Linux's (prctl)")
def test_the_child_ends_when_its_parent_is_killed_outright(tmp_path):
    """An intermediate process starts ``sleep`` with a death signal, then is SIGKILLed:
    the kernel must end the sleep at once (the launcher killed outright takes mpiexec with it)."""
    pidfile = tmp_path / "pid"
    parent = subprocess.Popen([sys.executable, "-c", (
        "import os, sys, time\n"
        "from shoal.process import Process\n"
        "p = Process(['/bin/sleep', '300'], dict(os.environ), death_signal=15)\n"
        "open(sys.argv[1], 'w').write(str(p.pid))\n"
        "time.sleep(300)\n"), str(pidfile)])
    try:
        deadline = time.monotonic() + HANG_GUARD
        while not pidfile.exists() or not pidfile.read_text():
            assert time.monotonic() < deadline, "the intermediate process did not start its child"
            time.sleep(0.01)
        child = int(pidfile.read_text())
        parent.kill()
        parent.wait(HANG_GUARD)
        while _alive(child):
            assert time.monotonic() < deadline, f"sleep (pid {child}) outlived its killed parent"
            time.sleep(0.01)
    finally:
        parent.kill()
        parent.wait(HANG_GUARD)


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, reaped by init soon, counts as ended)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False
