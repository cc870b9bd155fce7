"""The errors of futures nobody retrieved, reported readably (issue 41): Charm4py's
``tests/exceptions/pool.py`` drops 1,180 failed futures on purpose, and each used to add a
full report (15,340 lines on stderr). Now the first error of each kind and place is
reported in full, and the others are counted in one line."""

from __future__ import annotations

import gc
import re
import subprocess
import sys
import textwrap

import pytest
from support.commands import clean_env

import shoal
from shoal._runtime import unretrieved

from support.jobs import run_inproc

FULL = "the error of a future nobody retrieved"

PROGRAM = """
import sys
import shoal


class W(shoal.Chare):
    def bad_value(self, i):
        raise ValueError(f"bad value {i}")

    def bad_key(self, i):
        return {}[i]


def main(args):
    n, kinds = int(args[1]), args[2].split(",")
    a = shoal.Array(W, 2)
    for i in range(n):
        for kind in kinds:
            getattr(a[1], kind)(i, ret=True)  # dropped at once: nobody retrieves its error
    shoal.quiescence().get()
    print("end")


shoal.start(main)
"""


def _run(tmp_path, n: int, kinds: str, *launch: str) -> subprocess.CompletedProcess:
    (tmp_path / "prog.py").write_text(textwrap.dedent(PROGRAM))
    env = clean_env()
    cmd = [sys.executable, "-m", "shoal", "run", *launch, "prog.py", str(n), kinds]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path)
    assert proc.returncode == 0 and proc.stdout.splitlines() == ["end"], proc
    return proc


def _counts(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if "more errors like it" in line or "more error like it" in line]


@pytest.mark.parametrize("launch", [pytest.param(("-n", "2"), marks=pytest.mark.mpi, id="mpi"),
                                    pytest.param(("-n", "2", "--transport", "inproc"), id="inproc")])
def test_many_errors_of_one_kind_make_one_report_and_one_count(tmp_path, launch):
    proc = _run(tmp_path, 300, "bad_value", *launch)
    assert proc.stderr.count(FULL) == 1, proc.stderr
    assert "ValueError: bad value" in proc.stderr and "W.bad_value of element (1,)" in proc.stderr
    counts = _counts(proc.stderr)
    assert len(counts) == 1, proc.stderr
    assert re.fullmatch(r"shoal: PE 0: … and 299 more errors like it \(ValueError at .*prog\.py:\d+ in bad_value\) "
                        r"from futures nobody retrieved", counts[0]), counts
    assert len(proc.stderr.splitlines()) < 30, proc.stderr


def test_two_kinds_are_both_reported(tmp_path):
    proc = _run(tmp_path, 50, "bad_value,bad_key", "-n", "2", "--transport", "inproc")
    assert proc.stderr.count(FULL) == 2, proc.stderr
    assert "ValueError: bad value" in proc.stderr and "KeyError: " in proc.stderr
    counts = sorted(_counts(proc.stderr))
    assert len(counts) == 2, proc.stderr
    assert "… and 49 more errors like it (KeyError at " in counts[0] and " in bad_key) " in counts[0], counts
    assert "… and 49 more errors like it (ValueError at " in counts[1] and " in bad_value) " in counts[1], counts


def test_one_error_alone_has_no_count(tmp_path):
    proc = _run(tmp_path, 1, "bad_value", "-n", "2", "--transport", "inproc")
    assert proc.stderr.count(FULL) == 1 and not _counts(proc.stderr), proc.stderr


class Faulty(shoal.Chare):
    def fail(self, i):
        raise ValueError(f"bad value {i}")


def test_the_count_comes_when_the_job_is_over(capsys):
    """In this process (a notebook, a test run): the job's count when its runtime goes,
    and the next job reports its first error in full again."""

    def main(args):
        a = shoal.Array(Faulty, 2)
        for i in range(20):
            a[1].fail(i, ret=True)
        shoal.quiescence().get()

    for _ in range(2):
        assert run_inproc(main, pes=2) == 0
        gc.collect()  # the job's runtimes, and their reports, go
        unretrieved.report_repeated_errors()  # (a no-op where they went)
        err = capsys.readouterr().err
        assert err.count(FULL) == 1, err
        assert _counts(err) == [f"shoal: PE 0: … and 19 more errors like it (ValueError at {__file__}:"
                                f"{Faulty.fail.__code__.co_firstlineno + 1} in fail) from futures nobody retrieved"], err


def test_where_an_error_was_raised():
    try:
        raise KeyError(1)
    except KeyError as exc:
        here = exc
    assert unretrieved._raised_at(here) == f"{__file__}:{here.__traceback__.tb_lineno} in test_where_an_error_was_raised"
    remote = ValueError("x")
    remote.add_note('[shoal] raised on PE 1 in W.f of element (1,):\nTraceback (most recent call last):\n'
                    '  File "prog.py", line 12, in f\nValueError: x')
    assert unretrieved._raised_at(remote) == "prog.py:12 in f"
    bare = ValueError("y")
    bare.add_note("[shoal] raised on PE 3 in pool task g")
    assert unretrieved._raised_at(bare) == "pool task g"
    assert unretrieved._raised_at(ValueError("z")) == ""
