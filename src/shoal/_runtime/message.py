"""Wire header and payload codec.

Header: ``<BBHIIQ`` = kind, index rank, entry-method id, source PE, aux word,
collection id; then the element index as ``rank`` signed 64-bit integers. The aux
word carries what each kind needs without touching the payload: the future id of
``ret=True``, a channel tag, a reduction sequence number.

Payload: one pickle (protocol 5) whose buffer-protocol objects (NumPy arrays,
``PickleBuffer``) travel as separate out-of-band segments, never copied into the
pickle stream.
"""

from __future__ import annotations

import io
import pickle
import struct

TYPE_CHECKING = False  # typing is for type checkers: a PE's start-up skips its import
if TYPE_CHECKING:
    from typing import Any

    import numpy as np

from ..gpu.kinds import kind_of
from ..errors import ShoalError
from ..numpy_types import ndarray
from .._transport.base import DeviceSegment
from .devices import MARKED, reduce_device
from .kinds import Kind

__all__ = [
    "Kind",
    "HEADER",
    "KWARGS",
    "ARRAYS",
    "KIND_MASK",
    "FWD",
    "pack_header",
    "unpack_header",
    "encode",
    "encode_shared",
    "decode",
    "encode_call",
    "encode_call_shared",
    "decode_call",
    "unpicklable",
    "bad_ret",
]


HEADER = struct.Struct("<BBHIIQ")
INDEX_STRUCTS = [struct.Struct("<%dq" % n) for n in range(9)]
_pack = HEADER.pack
_unpack = HEADER.unpack_from
_HSIZE = HEADER.size


def pack_header(kind: int, entry: int, src: int, aux: int, coll: int, index: tuple = ()) -> bytes:
    """Encode a header; ``index`` is the destination element's index tuple."""
    n = len(index)
    if n == 0:
        return _pack(kind, 0, entry, src, aux, coll)
    return _pack(kind, n, entry, src, aux, coll) + INDEX_STRUCTS[n].pack(*index)


def pack_index(index: tuple) -> bytes:
    """The index part of a header, cacheable per destination."""
    return INDEX_STRUCTS[len(index)].pack(*index) if index else b""


def unpack_header(data: bytes) -> tuple[int, int, int, int, int, tuple]:
    """Decode a header into ``(kind, entry, src, aux, coll, index)``."""
    kind, n, entry, src, aux, coll = _unpack(data)
    index = INDEX_STRUCTS[n].unpack_from(data, _HSIZE) if n else ()
    return kind, entry, src, aux, coll, index


_PLAIN_KINDS = frozenset("biufc")  # dtypes fully described by dtype.str (others: NumPy's own pickling)


def _rebuild_array(buf: Any, dtype: str, shape: tuple) -> np.ndarray:
    import numpy as np

    return np.frombuffer(buf, dtype).reshape(shape)


class _Pickler(pickle.Pickler):
    """Protocol-5 pickler with a short path for contiguous NumPy arrays.

    NumPy's own ``__reduce_ex__`` costs microseconds per array; this sends the same
    out-of-band buffer with a three-field rebuild recipe instead.
    """

    def reducer_override(self, obj: Any) -> Any:
        cls = type(obj)
        if cls in _HOST_TYPES:  # (never NumPy's array: arrays return below, before _device_reduction)
            return NotImplemented
        if cls is ndarray():
            if obj.dtype.kind in _PLAIN_KINDS and obj.flags.c_contiguous:
                return _rebuild_array, (pickle.PickleBuffer(obj), obj.dtype.str, obj.shape)  # type: ignore[arg-type]
            return NotImplemented
        return _device_reduction(obj)


#: classes known to be host objects; any other is asked whether it is a device array
_HOST_TYPES: set[type] = set()
#: >0 while encoding a message that several PEs decode (see :func:`encode_shared`)
_shared = 0


def _device_reduction(obj: Any) -> Any:
    """The reduction of a device array (``devices.py``), or NotImplemented for host objects."""
    cls = type(obj)
    if cls in _HOST_TYPES:
        return NotImplemented
    kind = kind_of(obj)
    if kind is None:
        if len(_HOST_TYPES) < _CACHE_LIMIT and not hasattr(cls, "is_cuda"):
            _HOST_TYPES.add(cls)  # (a torch tensor's class holds host and device tensors)
        return NotImplemented
    done = _device_memo.get(id(obj))
    if done is None:  # an encoder that pickles again (see _Encoder) must not lend a buffer twice
        done = _device_memo[id(obj)] = (reduce_device(obj, kind, _shared > 0), obj)
    return done[0]


#: id(device array) -> (its reduction, the array) during one encoding
_device_memo: dict[int, tuple] = {}


#: at most this many out-of-band buffers per message: past it, buffers below
#: ``_IN_BAND_BELOW`` bytes and then all the rest travel inside the pickle stream, so
#: a list of 70,000 small arrays is one segment, not 70,000 (frame headers hold 16 bits)
_MAX_OUT_OF_BAND = 64
_IN_BAND_BELOW = 64 * 1024


class _Encoder:
    """One reusable pickler and stream: encoding allocates only its result.

    What plain pickle cannot name (lambdas, closures, classes made inside functions)
    is pickled by value with cloudpickle instead; only failures pay for that attempt.
    """

    def __init__(self) -> None:
        self.stream = io.BytesIO()
        self.buffers: list = []
        self.pickler = _Pickler(self.stream, protocol=5, buffer_callback=self.buffers.append)
        self.busy = False

    def __call__(self, obj: Any) -> list:
        if self.busy:  # re-entered from a __reduce__: use a fresh encoder
            return _Encoder()(obj)
        stream, buffers = self.stream, self.buffers
        self.busy = True
        try:
            try:
                self.pickler.dump(obj)
            except (pickle.PicklingError, AttributeError, TypeError) as exc:
                self._reset()
                _by_value(obj, stream, buffers, exc)
            if len(buffers) > _MAX_OUT_OF_BAND:
                self._reset()
                _Pickler(stream, protocol=5, buffer_callback=_Selective(buffers)).dump(obj)
            out: list = [stream.getvalue(), *[b.raw() for b in buffers]] if buffers else [stream.getvalue()]
            if MARKED:  # device arrays for MPI itself: their markers become the device segments
                out = [out[0], *[MARKED.get(id(v.obj), v) for v in out[1:]]]
        finally:
            self._reset()
            self.busy = False
            if _device_memo:
                _device_memo.clear()
                MARKED.clear()
        return out

    def _reset(self) -> None:
        self.stream.seek(0)
        self.stream.truncate()
        self.buffers.clear()
        self.pickler.clear_memo()


class _Selective:
    """A buffer callback that keeps only large buffers out of band, and few of them."""

    __slots__ = ("buffers",)

    def __init__(self, buffers: list):
        self.buffers = buffers

    def __call__(self, buf: pickle.PickleBuffer) -> bool:
        raw = buf.raw()
        if id(raw.obj) in MARKED:  # device memory always travels out of band
            self.buffers.append(buf)
            return False
        if len(self.buffers) >= _MAX_OUT_OF_BAND or raw.nbytes < _IN_BAND_BELOW:
            return True  # true: in the stream
        self.buffers.append(buf)
        return False


def _by_value(obj: Any, stream: io.BytesIO, buffers: list, first: BaseException) -> None:
    """Pickle ``obj`` with cloudpickle (functions and classes by value); re-raise
    ``first`` if that fails too, since it names what plain pickle could not handle."""
    try:
        import cloudpickle
    except ImportError:
        raise first from None
    try:
        _by_value_pickler(cloudpickle)(stream, protocol=5, buffer_callback=buffers.append).dump(obj)
    except Exception:
        raise first from None


_BY_VALUE: Any = None


def _by_value_pickler(cloudpickle: Any) -> Any:
    """cloudpickle's pickler, except that classes importable here (``__main__``'s
    included: every PE runs the same program) go by reference, as plain pickle sends them."""
    global _BY_VALUE
    if _BY_VALUE is None:

        class ByValue(cloudpickle.Pickler):  # type: ignore[misc, name-defined]
            def reducer_override(self, obj: Any) -> Any:
                if isinstance(obj, type) and _importable(obj):
                    return NotImplemented
                device = _device_reduction(obj)
                return super().reducer_override(obj) if device is NotImplemented else device

        _BY_VALUE = ByValue
    return _BY_VALUE


def _importable(cls: type) -> bool:
    """Whether ``cls`` can be found again by its module and qualified name."""
    import sys

    found: Any = sys.modules.get(cls.__module__)
    for part in cls.__qualname__.split("."):
        found = getattr(found, part, None)
    return found is cls


_loads = pickle.loads

#: ``encode(obj)``: pickle ``obj`` into segments: the stream, then each out-of-band buffer.
encode = _Encoder()


def encode_shared(obj: Any) -> list:
    """:func:`encode` for a message that more than one PE decodes (a broadcast, a creation,
    a multicast, a checkpoint): device arrays in it travel staged, never lent to one PE."""
    global _shared
    _shared += 1
    try:
        return encode(obj)
    finally:
        _shared -= 1


def encode_call_shared(args: tuple, kwargs: dict | None) -> tuple[int, list]:
    """:func:`encode_call` for a message that more than one PE decodes."""
    global _shared
    _shared += 1
    try:
        return encode_call(args, kwargs)
    finally:
        _shared -= 1


def segment_nbytes(segment: Any) -> int:
    """The size of one segment of a message, in host or device memory."""
    return segment.nbytes if type(segment) is DeviceSegment else memoryview(segment).nbytes


def portable_segment(segment: Any) -> Any:
    """A received segment as something pickle carries: bytes, or the device memory's
    :class:`DeviceSegment` (which pickles its device array like any other)."""
    return segment if isinstance(segment, (bytes, ndarray(), DeviceSegment)) else bytes(segment)


def decode(segments: list) -> Any:
    """Inverse of :func:`encode`; arrays are rebuilt on the received memory."""
    if len(segments) == 1:
        return _loads(segments[0])
    return _loads(segments[0], buffers=segments[1:])


#: kind-byte flags of entry-method calls: how the payload encodes the arguments
KWARGS = 0x80  # the pickle holds (args, kwargs)
ARRAYS = 0x40  # every argument is a plain NumPy array: a descriptor segment, then their buffers
FWD = 0x20  # forwarded by a PE the element left: the host then keeps the sender's order
KIND_MASK = 0x1F

_descriptors: dict[tuple, bytes] = {}  # ((dtype, shape), ...) -> descriptor bytes
_layouts: dict[bytes, tuple] = {}  # descriptor bytes -> ((dtype, shape), ...)
_CACHE_LIMIT = 4096


def _describe(key: tuple) -> bytes:
    parts = [struct.pack("<B", len(key))]
    for dtype, shape in key:
        code = dtype.str.encode()
        parts.append(struct.pack(f"<B{len(code)}sB{len(shape)}q", len(code), code, len(shape), *shape))
    desc = b"".join(parts)
    if len(_descriptors) > _CACHE_LIMIT:
        _descriptors.clear()
    _descriptors[key] = desc
    return desc


def _layout(desc: bytes) -> tuple:
    import numpy as np

    n, off, out = desc[0], 1, []
    for _ in range(n):
        clen = desc[off]
        dtype = np.dtype(desc[off + 1 : off + 1 + clen].decode())
        off += 1 + clen
        ndim = desc[off]
        shape = struct.unpack_from(f"<{ndim}q", desc, off + 1)
        off += 1 + 8 * ndim
        out.append((dtype, shape))
    layout = tuple(out)
    if len(_layouts) > _CACHE_LIMIT:
        _layouts.clear()
    _layouts[desc] = layout
    return layout


def _encode_arrays(args: tuple) -> list | None:
    """Segments for arguments that are all plain arrays; None otherwise.

    This skips pickle entirely: a cached descriptor of dtypes and shapes, then each
    array's own memory (sent out-of-band, so large arrays still go zero-copy). A
    strided array (a column face ``u[:, 0]``) is packed into a C-ordered copy first.
    """
    import numpy as np  # (imported: args[0] is an array)

    if len(args) == 1:  # the common case, without loops
        a = args[0]
        k: tuple = ((a.dtype, a.shape),)
        desc = _descriptors.get(k)
        if desc is None:
            if a.dtype.kind not in _PLAIN_KINDS:
                return None
            desc = _describe(k)
        return [desc, a] if a.flags.c_contiguous else [desc, np.ascontiguousarray(a)]
    key = []
    strided = False
    for a in args:
        if type(a) is not np.ndarray or a.dtype.kind not in _PLAIN_KINDS:
            return None
        key.append((a.dtype, a.shape))
        strided = strided or not a.flags.c_contiguous
    k = tuple(key)
    desc = _descriptors.get(k) or _describe(k)
    if strided:
        return [desc, *(np.ascontiguousarray(a) for a in args)]
    return [desc, *args]


#: ``pickle_simple(args)``: the compiled core's pickle of a tuple of None, bools, floats,
#: 64-bit ints, short strs, small plain arrays, pending futures and tuples of them (None
#: for anything else), once a core runs here (core_contract.py, _native/simple_pickle.c)
pickle_simple: Any = None


def encode_call(args: tuple, kwargs: dict | None) -> tuple[int, list]:
    """The kind flag and segments of an entry-method call's arguments."""
    if kwargs:
        return KWARGS, encode((args, kwargs))
    if args and type(args[0]) is ndarray():
        segments = _encode_arrays(args)
        if segments is not None:
            return ARRAYS, segments
    if pickle_simple is not None:
        simple = pickle_simple(args)
        if simple is not None:
            return 0, [simple]
    return 0, encode(args)


def decode_call(kind: int, segments: list) -> tuple[tuple, dict | None]:
    """Inverse of :func:`encode_call`: ``(args, kwargs)``."""
    if kind & ARRAYS:
        import numpy as np

        desc = segments[0]
        if type(desc) is not bytes:
            desc = bytes(desc)
        layout = _layouts.get(desc) or _layout(desc)
        if len(layout) == 1:  # the common case, without loops
            dtype, shape = layout[0]
            a = np.frombuffer(segments[1], dtype)
            return (a if len(shape) == 1 else a.reshape(shape),), None
        return tuple(
            np.frombuffer(buf, dtype).reshape(shape) for (dtype, shape), buf in zip(layout, segments[1:])
        ), None
    payload = decode(segments)
    return payload if kind & KWARGS else (payload, None)


def unpicklable(cls: type, name: str, args: tuple, kwargs: dict, exc: Exception) -> Exception:
    """Name the argument that cannot be sent (shoal's own errors, a returned loan's, go as they are)."""
    if isinstance(exc, ShoalError):
        return exc
    labelled = [(str(i), a) for i, a in enumerate(args)] + [(repr(k), a) for k, a in (kwargs or {}).items()]
    for label, a in labelled:
        try:
            encode(a)
        except Exception as e:  # noqa: BLE001
            return TypeError(
                f"cannot send argument {label} ({type(a).__name__}) of {cls.__qualname__}.{name}: {e}; "
                "entry-method arguments must be picklable"
            )
    return TypeError(f"cannot send the arguments of {cls.__qualname__}.{name}: {exc}")


def bad_ret(cls: type, name: str, ret: object) -> TypeError:
    """The error of a call whose ``ret=`` is not a bool (``ret=5`` would read as True)."""
    return TypeError(f"{cls.__qualname__}.{name}(ret={ret!r}): ret takes True or False, not {type(ret).__name__}")
