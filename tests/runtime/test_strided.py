"""Strided buffers: channels and receive sets send from and receive into non-contiguous
views (a column face ``u[:, 0]``), and a buffer that cannot take a message is refused
with what to do instead.

tests/programs/strided.py runs a ring of 2-D and 3-D blocks trading column faces for
several rounds, small (eager) and large (rendezvous), through ``recv(into=)`` and a
receive set, on the in-process transport and under mpiexec with the compiled core on
and off.
"""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from support.commands import clean_env
from support import PROGRAMS
from support.jobs import run_inproc

import shoal

PROGRAM = PROGRAMS / "strided.py"


def _shoal_run(pes: int, *options: str, env: dict | None = None) -> subprocess.CompletedProcess:
    environ = clean_env()
    environ.update(env or {})
    cmd = [sys.executable, "-m", "shoal", "run", "-n", str(pes), *options, str(PROGRAM)]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=environ, cwd=PROGRAM.parent)


def _check(proc: subprocess.CompletedProcess) -> None:
    report = f"exit code {proc.returncode}\n--- stdout\n{proc.stdout}\n--- stderr\n{proc.stderr}"
    assert proc.returncode == 0, report
    assert proc.stdout.strip().splitlines()[-1] == "strided: OK", report


@pytest.mark.parametrize("pes", [2, 3])
def test_strided_faces_inproc(pes):
    _check(_shoal_run(pes, "--transport", "inproc"))


@pytest.mark.mpi
@pytest.mark.parametrize("pes, native", [(2, "1"), (3, "1"), (2, "0")], ids=["2pe-native", "3pe-native", "2pe-python"])
def test_strided_faces_under_mpiexec(pes, native):
    _check(_shoal_run(pes, env={"SHOAL_NATIVE": native}))


class Refusals(shoal.Chare):
    def __init__(self):
        self.ch = shoal.Channel(self, remote=self.collection[1 - self.index[0]])

    def run_(self):
        pass

    def recv_errors(self) -> list:
        out = []
        readonly = np.zeros(3)
        readonly.flags.writeable = False
        for into in (readonly, [0.0, 0.0]):
            try:
                self.ch.recv(into=into)
                out.append("no error")
            except shoal.ChannelError as exc:
                out.append(str(exc))
        try:
            shoal.ReceiveSet([self.ch], [np.broadcast_to(np.zeros(1), (4,))], then=self.run_)
            out.append("no error")
        except shoal.ChannelError as exc:
            out.append(str(exc))
        return out

    def send_column(self):
        self.ch.send(np.arange(12.0).reshape(4, 3)[:, 1])

    async def recv_wrong(self) -> str:
        try:
            await self.ch.recv(into=np.zeros((3, 3))[:, 0])
        except shoal.ChannelError as exc:
            return str(exc)
        return "no error"


def test_buffers_that_cannot_take_a_message_say_what_to_do():
    def main(args):
        out.extend(shoal.Array(Refusals, 2)[0].recv_errors(ret=True).get())

    out: list = []
    assert run_inproc(main, pes=2) == 0
    readonly, listed, broadcast = out
    assert "is read-only; pass a writable one" in readonly and "np.empty_like" in readonly
    assert "takes a NumPy array or a device array, not a list" in listed and "np.empty(shape, dtype)" in listed
    assert "shoal.ReceiveSet: buffer 0 (into[0])" in broadcast and "read-only" in broadcast


def test_a_strided_face_of_the_wrong_shape_names_the_buffer_to_post():
    def main(args):
        pair = shoal.Array(Refusals, 2)
        pair[1].send_column()
        out.append(pair[0].recv_wrong(ret=True).get())

    out: list = []
    assert run_inproc(main, pes=2) == 0
    assert "shape (4,)" in out[0] and "shape (3,)" in out[0]
    assert "post a buffer that matches, e.g. np.empty((4,), dtype=np.float64)" in out[0]


def test_strided_arrays_are_packed_as_plain_arrays():
    """A strided view goes as an array message (descriptor and C-ordered bytes), not a pickle."""
    from shoal._runtime.message import ARRAYS, decode_call, encode_call

    u = np.arange(20.0).reshape(4, 5)
    for args in [(u[:, 1],), (u[:, 1], u[1:3, ::2]), (np.asfortranarray(u),)]:
        flag, segments = encode_call(args, None)
        assert flag == ARRAYS
        back = decode_call(flag, segments)[0]
        assert all(np.array_equal(a, b) and b.flags.c_contiguous for a, b in zip(args, back))
