"""Device arrays in messages: what the pickler sends for one, and how the receiver rebuilds it.

A device array (CuPy, Numba, PyTorch: :mod:`shoal.gpu.kinds`) in an entry method's
arguments, a channel message or a future's value is pickled as a small *metadata record*
(kind, dtype, shape) plus the data by one of three paths (:mod:`shoal.gpu.paths`):

* ``mpi``: MPI is CUDA-aware. The sender copies the array on its device and hands the copy
  to the transport as a :class:`~shoal._transport.base.DeviceSegment`, an out-of-band
  buffer of the message that MPI moves device to device by the transport's rendezvous.
  The receiver's transport lands it in device memory the runtime names: the buffer a
  channel's ``recv(into=...)`` posted, or fresh memory that becomes the arriving array.
* ``ipc``: the sender copies the array on its device into a buffer of its own pool and
  sends that buffer's CUDA IPC handle; the receiver copies device to device out of it
  (opening each handle once) and acks, and the buffer goes back to the pool. The copy at
  the sender keeps shoal's value semantics: the sender may overwrite its array at once.
* ``staged``: the bytes travel in host memory, copied out and in through pinned buffers in
  chunks (:class:`shoal.gpu.staging.Stager`).

A message that more than one PE decodes (a broadcast, a collection's creation, a
multicast, a checkpoint) is always staged: an IPC buffer is lent to exactly one receiver.
The receiver rebuilds the sender's kind of array on its own device, or writes straight
into the buffer a channel's ``recv(into=...)`` posted.
"""

from __future__ import annotations

import pickle

TYPE_CHECKING = False  # typing is for type checkers: a PE's start-up skips its import
if TYPE_CHECKING:
    from typing import Any

    import numpy as np

from .._transport.base import DeviceSegment
from ..errors import GPUError
from ..numpy_types import ndarray
from ..gpu.kinds import ArrayKind, kind_named, kind_of
from ..gpu.ops import DeviceOps
from ..gpu.paths import choose_device, choose_path
from ..gpu.staging import Stager
from .context import current
from .kinds import NO_COLL, Kind

if TYPE_CHECKING:
    from .runtime import Runtime

__all__ = ["DeviceTransfers", "MARKED", "reduce_device", "allocate_device", "transfers", "posting", "my_device"]

#: device buffers lent to a receiver in this process: (owner PE, token) -> uint8 buffer. An
#: in-process receiver (same PE, or the inproc transport) reads them here instead of opening
#: its own process's IPC handle, which CUDA refuses.
_LENT_HERE: dict[tuple[int, int], Any] = {}

#: the ``mpi`` path's device copies in the message being encoded: id(marker) -> segment.
#: The pickle stream carries an empty marker buffer out of band where the array's bytes
#: would be; the encoder (message.py) puts the segment in its place.
MARKED: dict[int, DeviceSegment] = {}


def _size_class(nbytes: int) -> int:
    """Pool buffers come in powers of two from 4 KiB, so buffers are reused across sizes."""
    return max(4096, 1 << (max(nbytes, 1) - 1).bit_length())


class _OnDevice:
    """What one PE holds for one kind of device memory: its device, path, pool and stager."""

    def __init__(self, rt: "Runtime", ops: DeviceOps):
        settings, transport = rt.settings, rt.transport
        try:
            self.device = choose_device(transport.local_rank, ops.device_count(), settings.device)
        except ValueError as exc:
            raise GPUError(f"PE {rt.pe}: {exc}") from None
        ops.select(self.device)
        aware = ops.mpi_aware()
        if aware is None:
            aware = _mpi_says_aware(transport)
        try:
            one_node = transport.local_size == transport.size or transport.name == "inproc"
            self.path, self.why = choose_path(settings.gpu_path, aware, one_node, ops.ipc_supported())
        except ValueError as exc:
            raise GPUError(f"PE {rt.pe}: {exc}") from None
        self.ops = ops
        self.stager = Stager(ops, settings.gpu_chunk)
        self.free: dict[int, list] = {}  # size class -> [(buffer, handle)]

    def mpi_segment(self, flat: Any, private: bool) -> pickle.PickleBuffer:
        """Hand device bytes ``flat`` to MPI: the out-of-band marker the message's pickle
        carries for them. ``private``: ``flat`` is a copy already (else one is made here,
        so the sender may overwrite its array at once)."""
        import numpy as np

        if not private:
            copy = self.ops.empty((flat.nbytes,), np.dtype(np.uint8))
            self.ops.copy(copy, flat)
            flat = copy
        self.ops.sync()  # MPI reads it from another stream (or none): the copy must be done
        marker = bytearray()
        MARKED[id(marker)] = DeviceSegment(flat, flat.nbytes)
        return pickle.PickleBuffer(marker)


def _mpi_says_aware(transport: Any) -> bool:
    if transport.name != "mpi":
        return False
    from .._transport.mpi_library import cuda_aware

    return cuda_aware().startswith("yes")


class DeviceTransfers:
    """One PE's device messaging: buffers lent out by token, and their release."""

    def __init__(self, rt: "Runtime"):
        self.rt = rt
        self.pe = rt.pe
        self._states: dict[int, _OnDevice] = {}  # id(ops) -> state
        self.lent: dict[int, tuple[_OnDevice, Any, bytes]] = {}  # token -> (state, buffer, handle)
        self._token = 0
        #: the buffer a channel's ``recv(into=...)`` posted, while its message decodes
        self.posted: Any = None
        #: device views of posted buffers that MPI wrote a message into (``mpi`` path)
        self.landed: dict[int, Any] = {}

    def state(self, ops: DeviceOps) -> _OnDevice:
        st = self._states.get(id(ops))
        if st is None:
            st = self._states[id(ops)] = _OnDevice(self.rt, ops)
        return st

    # -- sending -------------------------------------------------------------------
    def reduce(self, obj: Any, kind: ArrayKind, shared: bool) -> tuple:
        """The pickle reduction of device array ``obj``: rebuild function and arguments."""
        import numpy as np

        ops = kind.ops
        st = self.state(ops)
        given = kind.native(obj)
        on = ops.device_of(given)
        if on != st.device:
            raise GPUError(
                f"PE {self.pe}: cannot send a {kind.name} array on device {on}: this PE uses device {st.device} "
                "(shoal.gpu.device() tells which; allocate after it, or set SHOAL_DEVICE)"
            )
        arr = ops.contiguous(given)
        meta = (kind.name, arr.dtype.str, tuple(arr.shape))
        flat = ops.flat(arr)
        if st.path == "mpi" and not shared and flat.nbytes:
            return _rebuild_mpi, (meta, st.mpi_segment(flat, private=arr is not given))
        if st.path == "ipc" and not shared:
            return _rebuild_ipc, (meta, *self.lend(st, flat))
        host = np.empty(flat.nbytes, np.uint8)
        st.stager.to_host(host, flat)
        return _rebuild_staged, (meta, pickle.PickleBuffer(host))  # type: ignore[arg-type]

    def lend(self, st: _OnDevice, flat: Any) -> tuple[int, int, bytes, int]:
        """Copy ``flat`` into a pool buffer lent to one receiver: ``(owner, token, handle, capacity)``."""
        nbytes, size = flat.nbytes, _size_class(flat.nbytes)
        free = st.free.get(size)
        buf, handle = free.pop() if free else st.ops.shareable(size)
        st.ops.copy(buf[:nbytes], flat)
        st.ops.sync()  # the receiver's copy, in another process, may start as soon as the message lands
        self._token = token = (self._token + 1) & 0xFFFFFFFF
        self.lent[token] = (st, buf, handle)
        _LENT_HERE[(self.pe, token)] = buf
        return self.pe, token, handle, size

    def release(self, token: int) -> None:
        """The receiver of lent buffer ``token`` copied it: back to the pool."""
        entry = self.lent.pop(token, None)
        _LENT_HERE.pop((self.pe, token), None)
        if entry is not None:
            st, buf, handle = entry
            st.free.setdefault(buf.nbytes, []).append((buf, handle))

    def on_release(self, kind: int, entry: int, src: int, aux: int, coll: int, index: tuple, segments: list,
                   header: bytes) -> None:
        """Kind.DEVICE: a receiver is done with lent buffer ``aux``."""
        self.release(aux)

    # -- receiving by MPI ----------------------------------------------------------------
    def mpi_state(self) -> _OnDevice:
        """The device state device memory from MPI lands in: the one on the ``mpi`` path
        (every built-in kind shares CuPy's)."""
        for st in self._states.values():
            if st.path == "mpi":
                return st
        from ..gpu.ops import cupy_missing, cupy_ops

        missing = cupy_missing()
        if missing is not None:
            raise GPUError(f"PE {self.pe}: a device array arrived by CUDA-aware MPI, but {missing}")
        st = self.state(cupy_ops())
        if st.path != "mpi":
            raise GPUError(f"PE {self.pe}: a device array arrived by CUDA-aware MPI, but this PE's GPU path "
                           f"is {st.path} ({st.why}); every PE must take the same path")
        return st

    def lent_count(self) -> int:
        """Buffers lent and not yet released (their receivers have not copied them yet)."""
        return len(self.lent)

    # -- receiving -----------------------------------------------------------------
    def target(self, kind: ArrayKind, st: _OnDevice, dtype: np.dtype, shape: tuple) -> tuple[Any, Any]:
        """Where a device array arriving now goes: ``(result, its uint8 device view)``, or
        ``(host array, None)`` when a host buffer was posted for it."""
        into, self.posted = self.posted, None
        if into is None:
            arr = st.ops.empty(shape, dtype)
            return kind.wrap(arr), st.ops.flat(arr)
        if type(into) is ndarray():
            self._check_posted(into, "host", dtype, shape)
            return into, None
        posted_kind = kind_of(into)
        assert posted_kind is not None  # Channel.recv checked it
        native = posted_kind.native(into)
        self._check_posted(native, posted_kind.name, dtype, shape)
        if not native.flags.c_contiguous:
            raise GPUError(f"PE {self.pe}: recv(into=...) posted a strided {posted_kind.name} array; "
                           "post a C-contiguous device buffer")
        return into, st.ops.flat(native)

    def _check_posted(self, into: Any, what: str, dtype: np.dtype, shape: tuple) -> None:
        if tuple(into.shape) != shape or into.dtype != dtype:
            raise GPUError(
                f"PE {self.pe}: a device array of shape {shape} and dtype {dtype} arrived for recv(into=...), "
                f"which posted a {what} array of shape {tuple(into.shape)} and dtype {into.dtype}; "
                "post a buffer of the same shape and dtype"
            )


def transfers(rt: "Runtime | None" = None) -> DeviceTransfers:
    """The device messaging of PE ``rt`` (this PE's by default), made on first use."""
    if rt is None:
        rt = current("sending or receiving a device array")
    dt = rt.devices
    if dt is None:
        dt = rt.devices = DeviceTransfers(rt)
    return dt


def reduce_device(obj: Any, kind: ArrayKind, shared: bool) -> tuple:
    """The pickler's reduction of device array ``obj`` (message.py calls it)."""
    return transfers().reduce(obj, kind, shared)


def _arriving(meta: tuple) -> tuple[DeviceTransfers, ArrayKind, _OnDevice, np.dtype, tuple]:
    import numpy as np

    name, dtype, shape = meta
    dt = transfers()
    kind = kind_named(name)
    if kind is None:
        raise GPUError(f"PE {dt.pe}: a {name} device array arrived, but this PE knows no such kind "
                       "(register it on every PE: shoal.gpu.register)")
    try:
        st = dt.state(kind.ops)
    except ImportError as exc:
        raise GPUError(f"PE {dt.pe}: a {name} device array arrived, but {exc}; install CuPy on every PE "
                       "that receives device arrays (pip install cupy-cuda12x)") from None
    return dt, kind, st, np.dtype(dtype), shape


def _host_bytes(into: np.ndarray) -> np.ndarray:
    """Host bytes to receive into ``into``: its own memory, or a scratch buffer when strided."""
    import numpy as np

    if into.flags.c_contiguous:
        return into.reshape(-1).view(np.uint8)
    return np.empty(into.nbytes, np.uint8)


def _unpack(into: np.ndarray, host: np.ndarray) -> None:
    """Finish :func:`_host_bytes`: a strided ``into`` takes the scratch buffer's values."""
    if not into.flags.c_contiguous:
        into[...] = host.view(into.dtype).reshape(into.shape)


def _rebuild_ipc(meta: tuple, owner: int, token: int, handle: bytes, capacity: int) -> Any:
    """Receive a lent device buffer: copy it out, ack the owner, give the array."""
    import numpy as np

    dt, kind, st, dtype, shape = _arriving(meta)
    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    src = _LENT_HERE.get((owner, token))
    src = st.ops.open(handle, capacity)[:nbytes] if src is None else src[:nbytes]
    try:
        result = _copy_out(dt, kind, st, dtype, shape, src)
    finally:
        if owner == dt.pe:
            dt.release(token)
        else:
            dt.rt.post(owner, Kind.DEVICE, 0, token, NO_COLL, (), None)
    return result


def _rebuild_mpi(meta: tuple, segment: DeviceSegment) -> Any:
    """Receive a device array MPI moved: the device memory it landed in, seen as the
    array, or the posted buffer it landed in, or a copy into the posted buffer."""
    dt, kind, st, dtype, shape = _arriving(meta)
    memory = segment.memory
    into = dt.posted
    if dt.landed.pop(id(memory), None) is memory:  # MPI wrote it into the posted buffer
        dt.posted = None
        dt._check_posted(kind.native(into), kind.name, dtype, shape)
        return into
    if into is None:
        return kind.wrap(st.ops.view(memory, dtype, shape))
    return _copy_out(dt, kind, st, dtype, shape, memory)


def _copy_out(dt: DeviceTransfers, kind: ArrayKind, st: _OnDevice, dtype: np.dtype, shape: tuple, src: Any) -> Any:
    """Copy arriving device bytes ``src`` to where the array goes (:meth:`DeviceTransfers.target`:
    a posted device or host buffer, or a new array); returns when the copy is done."""
    result, dst = dt.target(kind, st, dtype, shape)
    if dst is None:
        host = _host_bytes(result)
        st.ops.to_host(host, src)
        st.ops.sync()
        _unpack(result, host)
    else:
        st.ops.copy(dst, src)
        st.ops.sync()
    return result


def allocate_device(rt: "Runtime", posted: Any, nbytes: int) -> Any:
    """Where a device segment of ``nbytes`` arriving by MPI lands (the transport's device
    allocator): the device array a channel posted for it (``posted``, if it fits), else
    fresh device memory, as a flat uint8 device array."""
    import numpy as np

    dt = transfers(rt)
    st = dt.mpi_state()
    if posted is not None:
        kind = kind_of(posted)
        native = kind.native(posted) if kind is not None else None
        if native is not None and native.nbytes == nbytes and native.flags.c_contiguous:
            view = st.ops.flat(native)
            dt.landed[id(view)] = view
            return view
    return st.ops.empty((nbytes,), np.dtype(np.uint8))


def _rebuild_staged(meta: tuple, host: Any) -> Any:
    """Receive a staged device array: copy its host bytes onto this PE's device."""
    import numpy as np

    dt, kind, st, dtype, shape = _arriving(meta)
    data = np.frombuffer(host, np.uint8)
    result, dst = dt.target(kind, st, dtype, shape)
    if dst is None:
        host = _host_bytes(result)
        host[:] = data
        _unpack(result, host)
    else:
        st.stager.from_host(dst, data)
    return result


class posting:
    """``with posting(rt, into):`` decode a channel message into the buffer ``into``."""

    __slots__ = ("dt", "into")

    def __init__(self, rt: "Runtime", into: Any):
        self.dt = transfers(rt)
        self.into = into

    def __enter__(self) -> None:
        self.dt.posted = self.into

    def __exit__(self, *exc: Any) -> None:
        self.dt.posted = None


def my_device() -> int:
    """The GPU this PE uses (chosen and made current on first call): allocate the device
    arrays a PE sends after calling it, so they are on the device shoal expects."""
    from ..gpu.ops import cupy_missing, cupy_ops

    dt = transfers(current("shoal.my_device()"))
    missing = cupy_missing()
    if missing is not None:
        raise GPUError(f"PE {dt.pe}: shoal.my_device(): {missing}")
    return dt.state(cupy_ops()).device
