"""Device arrays in messages, on the CPU: path and device choice, the staging pipeline's
chunks, the metadata on the wire, and the whole protocol across real MPI processes with
the simulated device of ``gpu_sim`` (the CUDA calls themselves: test_gpu_cuda.py, on a GPU)."""

from __future__ import annotations

import os
import pickle
import sys

import numpy as np
import pytest
from support.commands import clean_env

import shoal
from shoal.errors import GPUError
from shoal.gpu import Stager, choose_device, choose_path, chunks, kind_of
from shoal.gpu.paths import parse_devices

from support.jobs import run_inproc

from support import TESTS as _TESTS
from support import gpu_sim  # registers the kind "sim"

#: device paths between PEs of one node (CUDA IPC among them): their jobs run on one node
pytestmark = pytest.mark.one_node

TESTS = str(_TESTS)


# -- decisions -----------------------------------------------------------------------

@pytest.mark.parametrize("forced, aware, one_node, want", [
    ("", True, True, "mpi"),
    ("", True, False, "mpi"),
    ("", None, True, "ipc"),
    ("", False, True, "ipc"),
    ("", False, False, "staged"),
    ("staged", False, True, "staged"),
    ("ipc", False, True, "ipc"),
])
def test_the_best_path_the_job_can_take(forced, aware, one_node, want):
    assert choose_path(forced, aware, one_node)[0] == want


def test_without_ipc_one_node_stages():
    path, why = choose_path("", False, True, ipc_supported=False)
    assert path == "staged" and "cannot share memory" in why


@pytest.mark.parametrize("forced, aware, one_node, words", [
    ("mpi", False, True, "does not say it is CUDA-aware \\(it says no\\)"),
    ("mpi", None, True, "it cannot be asked"),
    ("ipc", False, False, "more than one node"),
    ("nvlink", False, True, "is not a GPU path"),
])
def test_a_forced_path_the_job_cannot_take_is_an_error(forced, aware, one_node, words):
    with pytest.raises(ValueError, match=words):
        choose_path(forced, aware, one_node)


def test_devices_by_local_rank_or_by_list():
    assert [choose_device(r, 2) for r in range(4)] == [0, 1, 0, 1]
    assert [choose_device(r, 1) for r in range(3)] == [0, 0, 0]  # PEs share one GPU
    assert [choose_device(r, 4, "3") for r in range(2)] == [3, 3]
    assert [choose_device(r, 4, "2,0") for r in range(3)] == [2, 0, 2]
    assert parse_devices(" ") is None


@pytest.mark.parametrize("count, spec, words", [
    (0, "", "no CUDA device"),
    (2, "2", "names device 2, but this process sees 2 devices"),
    (2, "a", "not a device list"),
    (2, "-1", "not a device list"),
])
def test_bad_device_choices_say_why(count, spec, words):
    with pytest.raises(ValueError, match=words):
        choose_device(0, count, spec)


def test_device_settings_are_validated():
    import shoal.settings

    with pytest.raises(shoal.settings.SettingsError, match="SHOAL_GPU_PATH"):
        shoal.settings.load_settings({"SHOAL_GPU_PATH": "fast"})
    with pytest.raises(shoal.settings.SettingsError, match="SHOAL_DEVICE"):
        shoal.settings.load_settings({"SHOAL_DEVICE": "gpu0"})
    s = shoal.settings.load_settings({"SHOAL_DEVICE": "0,1", "SHOAL_GPU_PATH": "staged", "SHOAL_GPU_CHUNK": "65536"})
    assert (s.device, s.gpu_path, s.gpu_chunk) == ("0,1", "staged", 65536)


# -- staging --------------------------------------------------------------------------

def test_chunks_cover_the_bytes_once_in_order():
    assert chunks(10, 4) == [(0, 4), (4, 4), (8, 2)]
    assert chunks(8, 4) == [(0, 4), (4, 4)]
    assert chunks(0, 4) == []
    for n, c in [(1, 1), (1000, 7), (1 << 20, 65536)]:
        plan = chunks(n, c)
        assert sum(size for _, size in plan) == n
        assert all(off == prev_off + prev_size for (prev_off, prev_size), (off, _) in zip(plan, plan[1:]))
    with pytest.raises(ValueError):
        chunks(10, 0)


class _Logged(gpu_sim.SimOps):
    """SimOps that logs each copy and wait in order: the pipeline's schedule."""

    def __init__(self) -> None:
        super().__init__()
        self.log: list[tuple] = []
        self.events = 0

    def to_host(self, host, src):
        self.log.append(("d2h", host.nbytes))
        super().to_host(host, src)

    def from_host(self, dst, host):
        self.log.append(("h2d", host.nbytes))
        super().from_host(dst, host)

    def record(self):
        self.events += 1
        return self.events

    def wait(self, event):
        self.log.append(("wait", event))


@pytest.mark.parametrize("n", [1, 4096, 4097, 10_000, 65536 * 5 + 3])
def test_staging_round_trips_through_bounce_buffers(n):
    ops = _Logged()
    stager = Stager(ops, chunk=4096, buffers=2)
    data = np.random.default_rng(n).integers(0, 256, n, dtype=np.uint8)
    dev = gpu_sim.SimArray(data.copy(), 0)
    host = np.zeros(n, np.uint8)
    stager.to_host(host, dev)
    assert np.array_equal(host, data)
    back = gpu_sim.SimArray(np.zeros(n, np.uint8), 0)
    stager.from_host(back, host)
    assert np.array_equal(back.data, data)
    pieces = len(chunks(n, 4096))
    if pieces == 1:  # one copy each way, no bounce buffer
        assert ops.log == [("d2h", n), ("h2d", n)] and "pinned" not in ops.calls
    else:
        assert ops.calls["pinned"] == 2  # two bounce buffers, made once, reused
        d2h = [e for e in ops.log if e[0] == "d2h"]
        assert [size for _, size in d2h] == [size for _, size in chunks(n, 4096)]


def test_staging_overlaps_the_copy_of_one_chunk_with_the_next():
    """With two bounce buffers the device copies chunk i+1 before the host waits for chunk i."""
    ops = _Logged()
    Stager(ops, chunk=100, buffers=2).to_host(np.zeros(400, np.uint8), gpu_sim.SimArray(np.ones(400, np.uint8), 0))
    assert ops.log == [("d2h", 100), ("d2h", 100), ("wait", 1), ("d2h", 100), ("wait", 2), ("d2h", 100),
                       ("wait", 3), ("wait", 4)]


# -- metadata -----------------------------------------------------------------------

def test_host_objects_are_not_device_arrays():
    for obj in (np.zeros(3), b"x", 3.0, object(), [1], gpu_sim.SimArray):
        assert kind_of(obj) is None
    assert kind_of(gpu_sim.array([1.0])).name == "sim"


def _wire(rt_main):
    """Run ``rt_main`` on one in-process PE; return what it returned."""
    out = []
    run_inproc(lambda args: (out.append(rt_main()), shoal.exit()), pes=1)
    return out[0]


def test_a_staged_device_array_travels_as_metadata_and_one_out_of_band_buffer():
    from shoal._runtime.message import decode, encode_shared

    def body():
        x = gpu_sim.array(np.arange(12, dtype=np.int32).reshape(3, 4))
        segments = encode_shared(("label", x))
        stream = pickle.dumps(None)  # the metadata is small: no bytes of the array in the stream
        back = decode(segments)
        return len(segments), len(segments[0]), len(stream), back

    nseg, head, _, (label, y) = _wire(body)
    assert nseg == 2 and head < 200  # the pickle stream, then the array's bytes out of band
    assert label == "label" and isinstance(y, gpu_sim.SimArray)
    assert y.shape == (3, 4) and y.dtype == np.int32 and np.array_equal(y.data, np.arange(12).reshape(3, 4))


def test_a_lent_device_array_is_a_handle_and_returns_to_the_pool_when_copied():
    from shoal._runtime.devices import transfers
    from shoal._runtime.message import decode, encode

    def body():
        dt = transfers()
        x = gpu_sim.array(np.arange(1000.0))
        segments = encode(x)
        lent = dt.lent_count()
        x.data[:] = -1  # value semantics: the sender may overwrite at once
        y = decode(segments)
        return len(segments), lent, dt.lent_count(), y.data.copy(), dt._states[id(gpu_sim.OPS)].path

    nseg, lent, after, y, path = _wire(body)
    assert path == "ipc" and nseg == 1 and lent == 1 and after == 0
    assert np.array_equal(y, np.arange(1000.0))


def test_on_the_mpi_path_a_device_array_is_a_device_segment_of_its_own(monkeypatch):
    from shoal._transport import DeviceSegment
    from shoal._runtime.message import decode, encode

    monkeypatch.setenv("SIM_MPI_AWARE", "1")

    def body():
        x = gpu_sim.array(np.arange(1000.0))
        segments = encode(("x", x))
        x.data[:] = -1  # value semantics: the segment is the sender's own copy
        many = encode([np.ones(100) for _ in range(70)] + [gpu_sim.array(np.arange(3.0))])
        return segments, decode(segments), many, decode(many)

    segments, (label, y), many, back = _wire(body)
    assert len(segments) == 2 and type(segments[1]) is DeviceSegment and segments[1].nbytes == 8000
    assert label == "x" and isinstance(y, gpu_sim.SimArray) and np.array_equal(y.data, np.arange(1000.0))
    # past 64 buffers the small ones go in band; device memory never does
    assert [type(s) for s in many[1:]] == [DeviceSegment] and np.array_equal(back[-1].data, np.arange(3.0))
    assert all(np.array_equal(a, np.ones(100)) for a in back[:-1])


def test_a_strided_device_array_arrives_contiguous():
    from shoal._runtime.message import decode, encode_shared

    def body():
        x = gpu_sim.SimArray(np.arange(20.0).reshape(4, 5)[:, 1], 0)
        return decode(encode_shared(x)).data

    assert np.array_equal(_wire(body), np.arange(20.0).reshape(4, 5)[:, 1])


def test_an_array_on_a_device_the_pe_does_not_use_is_refused():
    from shoal._runtime.message import encode

    def body():
        with pytest.raises(GPUError) as info:
            encode(gpu_sim.array([1.0], device=1))  # PE 0 uses device 0
        return str(info.value)

    text = _wire(body)
    assert text.startswith("PE 0: cannot send a sim array on device 1: this PE uses device 0")


def test_a_kind_the_receiver_does_not_know_is_an_error_naming_the_pe():
    from shoal._runtime.devices import _rebuild_staged

    def body():
        with pytest.raises(GPUError, match="PE 0: a rocm device array arrived, but this PE knows no such kind"):
            _rebuild_staged(("rocm", "<f8", (1,)), np.zeros(8, np.uint8))
        return True

    assert _wire(body)


# -- real MPI processes ----------------------------------------------------------------

PROGRAM = f"""
import sys
import numpy as np
sys.path.insert(0, {TESTS!r})
from support import gpu_sim
import shoal
from shoal._runtime.devices import transfers
from shoal.errors import GPUError


def device():
    return transfers().state(gpu_sim.OPS)


class Peer(shoal.Chare):
    def setup(self):
        return device().device, device().path

    def take(self, a):
        assert isinstance(a, gpu_sim.SimArray), type(a)
        return shoal.my_pe(), a.device, a.data.copy()

    def lent(self):
        return transfers().lent_count()

    async def exchange(self, peer, n):
        ch = shoal.Channel(self, remote=peer)
        dev = device().device
        if self.index[0] == 0:
            x = gpu_sim.array(np.arange(n, dtype=np.float64), dev)
            for _ in range(3):
                ch.send(x)
                x.data[:] += 1  # overwritten as soon as sent
            ch.send(gpu_sim.array(np.zeros(n + 1), dev))
            return "sent"
        buf = gpu_sim.array(np.zeros(n), dev)
        got = await ch.recv(into=buf)
        first = (got is buf, float(buf.data.sum()))
        host = np.zeros(n)
        got = await ch.recv(into=host)
        second = (got is host, float(host.sum()))
        plain = await ch.recv()
        try:
            await ch.recv(into=np.zeros(n))  # the (n + 1)-element message
            wrong = "no error"
        except GPUError as exc:
            wrong = str(exc)
        return first, second, (type(plain).__name__, float(plain.data.sum())), wrong


def main(args):
    n = int(args[1])
    a = shoal.Array(Peer, 2)
    setup = a.setup(ret=True).get()
    print("setup", setup)
    x = gpu_sim.array(np.arange(n, dtype=np.float32), device().device)
    pe, dev, data = a[1].take(x, ret=True).get()
    print("p2p", pe, dev, bool(np.array_equal(data, np.arange(n, dtype=np.float32))))
    print("sender", sorted(gpu_sim.OPS.calls))
    got = a.take(x, ret=True).get()
    print("bcast", sorted((p, d, bool(np.array_equal(v, x.data))) for p, d, v in got))
    f0, f1 = a[0].exchange(a[1], n, ret=True), a[1].exchange(a[0], n, ret=True)
    print("channel", f0.get(), f1.get())
    print("lent", a.lent(ret=True).get(), transfers().lent_count())
    print("calls", sorted(gpu_sim.OPS.calls))
    shoal.exit()


shoal.start(main)
"""


@pytest.mark.mpi
@pytest.mark.parametrize("path, n", [("", 1000), ("", 300_000), ("staged", 1000), ("staged", 300_000),
                                     ("mpi", 1000), ("mpi", 300_000)])
def test_device_arrays_cross_processes(mpi_job, path, n):
    env = {"SHOAL_GPU_PATH": path, "SHOAL_GPU_CHUNK": "65536"} if path else {}
    if path == "mpi":  # the simulated device's "CUDA-aware MPI" (gpu_sim: the host MPI)
        env = {"SIM_MPI_AWARE": "1"}
    job = mpi_job(PROGRAM, n=2, args=(str(n),), env=env)
    assert job.returncode == 0, job
    out = job.stdout
    want_path = path or "ipc"
    assert f"setup [(0, '{want_path}'), (1, '{want_path}')]" in out, job  # one device each: local rank
    assert "p2p 1 1 True" in out, job
    assert "bcast [(0, 0, True), (1, 1, True)]" in out, job
    total = float(np.arange(n, dtype=np.float64).sum())
    assert f"(True, {total!r}), (True, {total + n!r}), ('SimArray', {total + 2 * n!r})" in out, job
    assert (f"a device array of shape ({n + 1},) and dtype float64 arrived for recv(into=...), which posted "
            f"a host array of shape ({n},)") in out, job
    assert "PE 1: a device array" in out, job
    assert "lent [0, 0] 0" in out, job  # every lent buffer came back
    calls = out.split("calls")[1]
    if want_path == "ipc":
        assert "'shareable'" in calls
    if want_path == "mpi":  # a private device copy for MPI: never through host memory or IPC
        assert "sender ['copy', 'sync']" in out and "'shareable'" not in calls, job
    if path == "staged" and n > 65536:
        assert "'pinned'" in calls  # pipelined through bounce buffers


@pytest.mark.mpi
def test_a_forced_path_the_job_cannot_take_ends_it_clearly(mpi_job):
    job = mpi_job(PROGRAM, n=2, args=("10",), env={"SHOAL_GPU_PATH": "mpi"}, timeout=60)
    assert job.returncode != 0
    assert "SHOAL_GPU_PATH=mpi, but the MPI library does not say it is CUDA-aware (it says no)" in job.stderr, job
    assert "PE 0" in job.stderr or "PE 1" in job.stderr, job


MPI_PROGRAM = f"""
import sys
import time
import numpy as np
sys.path.insert(0, {TESTS!r})
from support import gpu_sim
import shoal
from shoal._runtime.devices import transfers


def device():
    return transfers().state(gpu_sim.OPS)


class Peer(shoal.Chare):
    def __init__(self):
        self.ch = shoal.Channel(self, remote=self.collection[1 - self.index[0]])
        self.kept = None

    def where(self):
        return shoal.my_pe(), device().path

    def keep(self, a):
        self.kept = a

    def kept_sum(self):
        return shoal.my_pe(), type(self.kept).__name__, self.kept.device, float(self.kept.data.sum())

    def mixed(self):
        dev, host = self.kept
        return float(dev.data.sum()), float(host.sum())

    def send_one(self, n, strided):
        x = gpu_sim.array(np.arange(2 * n if strided else n, dtype=np.float64), device().device)
        self.ch.send(x[::2] if strided else x)
        x.data[:] = -1  # value semantics: the sender may overwrite at once

    async def posted(self, n, strided):
        buf = gpu_sim.array(np.zeros(n), device().device)
        copies = gpu_sim.OPS.calls.get("copy", 0)
        fut = self.ch.recv(into=buf)
        self.collection[0].send_one(n, strided)
        got = await fut
        return got is buf, float(buf.data.sum()), gpu_sim.OPS.calls.get("copy", 0) - copies

    async def take_inbox(self):
        got = await self.ch.recv()
        return shoal.my_pe(), type(got).__name__, float(got.data.sum())


def main(args):
    n = int(args[1])
    a = shoal.Array(Peer, 2)
    print("paths", a.where(ret=True).get())
    total = float(np.arange(n).sum())
    print("posted", a[1].posted(n, False, ret=True).get(), total)
    print("strided", a[1].posted(n, True, ret=True).get(), float(np.arange(0, 2 * n, 2).sum()))
    x = gpu_sim.array(np.arange(n, dtype=np.float64), device().device)
    a[0].keep(x, ret=True).get()  # this PE: the private copy is the receiver's
    a[1].keep(x, ret=True).get()
    x.data[:] = 7
    print("kept", a[0].kept_sum(ret=True).get(), a[1].kept_sum(ret=True).get())
    a[0].send_one(n, False, ret=True).get()  # into element 1's inbox, not received yet
    a.migrate((1,), 0)  # its state and inbox move by MPI, device memory included
    while a[1].where(ret=True).get()[0] != 0:
        time.sleep(0.01)
    inbox = a[1].take_inbox(ret=True).get()
    print("moved", a[1].kept_sum(ret=True).get(), inbox)
    b = shoal.Array(Peer, 2)  # (a's element 1 is on PE 0 now)
    b[1].keep((x, np.full(40_000, 2.0)), ret=True).get()  # device memory beside a large host array
    print("mixed", b[1].mixed(ret=True).get())
    shoal.exit()


shoal.start(main)
"""


@pytest.mark.mpi
@pytest.mark.parametrize("n, native", [(1000, "1"), (300_000, "1"), (300_000, "0")])
def test_the_mpi_path_moves_device_memory_by_mpi(mpi_job, n, native):
    job = mpi_job(MPI_PROGRAM, n=2, args=(str(n),), env={"SIM_MPI_AWARE": "1", "SHOAL_NATIVE": native})
    assert job.returncode == 0, job
    out = job.stdout
    total = float(np.arange(n).sum())
    assert "paths [(0, 'mpi'), (1, 'mpi')]" in out, job
    assert f"posted (True, {total!r}, 0) {total!r}" in out, job  # MPI wrote into the posted buffer: no copy
    strided = float(np.arange(0, 2 * n, 2).sum())
    assert f"strided (True, {strided!r}, 0) {strided!r}" in out, job
    assert f"kept (0, 'SimArray', 0, {total!r}) (1, 'SimArray', 1, {total!r})" in out, job
    assert f"mixed ({7.0 * n!r}, 80000.0)" in out, job
    assert f"moved (0, 'SimArray', 0, {total!r}) (0, 'SimArray', {total!r})" in out, job


@pytest.mark.mpi
def test_device_memory_by_mpi_at_a_pe_without_cupy_ends_the_job_naming_it(mpi_job):
    from shoal.gpu import cupy_missing

    if cupy_missing() is None:
        pytest.skip("CuPy and a CUDA device are present: the receiving PE can take the array")
    program = f"""
import sys
import numpy as np
sys.path.insert(0, {TESTS!r})
from support import gpu_sim
import shoal
from shoal._runtime.devices import transfers


class Sink(shoal.Chare):
    def take(self, a):  # PE 1 has no device state of the simulated kind: it would use CuPy
        return "took"


def main(args):
    a = shoal.Array(Sink, 2)
    x = gpu_sim.array(np.arange(10.0), transfers().state(gpu_sim.OPS).device)
    print(a[1].take(x, ret=True).get())
    shoal.exit()


shoal.start(main)
"""
    job = mpi_job(program, n=2, env={"SIM_MPI_AWARE": "1"}, timeout=60)
    assert job.returncode != 0 and "took" not in job.stdout, job
    assert "PE 1: a device array arrived by CUDA-aware MPI, but CuPy is not installed" in job.stderr, job


@pytest.mark.mpi
def test_shared_gpus_and_device_lists(mpi_job):
    job = mpi_job(PROGRAM, n=2, args=("10",), env={"SIM_DEVICES": "1"})
    assert job.returncode == 0, job
    assert "setup [(0, 'ipc'), (0, 'ipc')]" in job.stdout and "p2p 1 0 True" in job.stdout, job
    job = mpi_job(PROGRAM, n=2, args=("10",), env={"SHOAL_DEVICE": "1,0"})
    assert job.returncode == 0, job
    assert "p2p 1 0 True" in job.stdout, job


def test_my_device_without_cupy_names_the_pe():
    pytest.importorskip("numpy")
    from shoal.gpu import cupy_missing

    why = cupy_missing()
    if why is None:
        pytest.skip("CuPy and a CUDA device are present: test_gpu_cuda.py covers this machine")

    def body():
        with pytest.raises(GPUError) as info:
            shoal.my_device()
        return str(info.value)

    assert _wire(body) == f"PE 0: shoal.my_device(): {why}"


def test_gpu_settings_reach_info(capsys):
    from shoal.cli import main

    os.environ.pop("SHOAL_GPU_PATH", None)
    assert main(["info", "--transport", "inproc"]) == 0
    out = capsys.readouterr().out
    assert "gpu" in out


def test_run_devices_sets_the_device_list_and_refuses_a_bad_one(tmp_path):
    import subprocess

    prog = tmp_path / "prog.py"
    prog.write_text("import os, shoal\nshoal.start(lambda a: (print('dev', os.environ['SHOAL_DEVICE']), shoal.exit()))\n")
    env = clean_env()
    run = [sys.executable, "-m", "shoal", "run", "-n", "1", "--transport", "inproc"]
    ok = subprocess.run([*run, "--devices", "1,0", str(prog)], capture_output=True, text=True, env=env, timeout=60)
    assert ok.returncode == 0 and "dev 1,0" in ok.stdout, ok
    bad = subprocess.run([*run, "--devices", "gpu1", str(prog)], capture_output=True, text=True, env=env, timeout=60)
    assert bad.returncode != 0 and "SHOAL_DEVICE" in bad.stderr and "device numbers" in bad.stderr, bad


SET_PROGRAM = f"""
import sys
import numpy as np
sys.path.insert(0, {TESTS!r})
from support import gpu_sim
import shoal
from shoal._runtime.devices import transfers


class Tile(shoal.Chare):
    def __init__(self):
        dev = transfers().state(gpu_sim.OPS).device
        peer = self.collection[1 - self.index[0]]
        self.a = shoal.Channel(self, remote=peer, port=1)
        self.b = shoal.Channel(self, remote=peer, port=2)
        self.bufs = [gpu_sim.array(np.zeros(1000), dev), gpu_sim.array(np.zeros(1000), dev)]
        self.rounds = []
        if self.index[0] == 1:
            self.inputs = shoal.ReceiveSet([self.a, self.b], self.bufs, then=self.step)

    def send(self, k):
        dev = transfers().state(gpu_sim.OPS).device
        self.a.send(gpu_sim.array(np.full(1000, float(k)), dev))
        self.b.send(gpu_sim.array(np.full(1000, 10.0 * k), dev))

    def post(self):
        self.inputs.post()

    def step(self):
        self.rounds.append((float(self.bufs[0].data.sum()), float(self.bufs[1].data.sum())))

    def result(self):
        return self.rounds


def main(args):
    t = shoal.Array(Tile, 2)
    t[1].post(ret=True).get()
    t[0].send(1, ret=True).get()   # lands in the posted device buffers
    import time
    for _ in range(100):
        if t[1].result(ret=True).get():
            break
        time.sleep(0.01)
    t[0].send(2, ret=True).get()   # comes early: taken at post()
    t[1].post(ret=True).get()
    for _ in range(100):
        if len(t[1].result(ret=True).get()) == 2:
            break
        time.sleep(0.01)
    print("rounds", t[1].result(ret=True).get())
    shoal.exit()


shoal.start(main)
"""


@pytest.mark.mpi
@pytest.mark.parametrize("path", ["", "staged"])
def test_a_receive_set_takes_device_buffers(mpi_job, path):
    job = mpi_job(SET_PROGRAM, n=2, env={"SHOAL_GPU_PATH": path} if path else {})
    assert job.returncode == 0, job
    assert "rounds [(1000.0, 10000.0), (2000.0, 20000.0)]" in job.stdout, job
