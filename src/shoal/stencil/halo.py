"""Halo exchange of a stencil tile: faces out, ghosts in, and the interior computed
while they travel.

Halos move over one channel per neighbour: a face along the outer axis is contiguous
and is sent as it is and received straight into the ghost layer (``recv(into=)``);
other faces are packed into a buffer and unpacked from one by generated C (NumPy's
strided copies without compiled kernels). After sending its faces, a tile computes the
part of the next statement that reads no ghost, then receives and computes the rim.
Host messages stay below the transport's rendezvous threshold (see :meth:`Halos._send`).

Tiles in device memory (``device="cuda"``) exchange device to device: faces of inner
axes are packed into device buffers by a strided device copy (CuPy's elementwise copy:
one launch per face, on the tile's stream, no generated code to keep), every face goes
as one device array (over CUDA IPC between PEs of one node: ``docs/gpu.md``) into a
posted device buffer, and is unpacked on the device. The tile waits for its stream
once per phase, before sending: the runtime copies a face out on a stream of its own.
"""

from __future__ import annotations

import ctypes
from typing import Any, Callable

import numpy as np

import shoal

from .build import load_copy
from .interface import GridSpec
from .memory import Memory

__all__ = ["Halos"]


class Halos:
    """The halo methods of :class:`shoal.stencil.backend.Tile` (a mixin: the tile holds
    the state below and runs statements with ``_run``)."""

    spec: GridSpec
    size: list[int]
    ghosts: tuple[int, ...]  # ghost layers held per axis
    arrays: list[Any]
    raw: list[Any]
    mem: Memory
    chan: dict[tuple[int, int], shoal.Channel]
    copy_args: dict[tuple, tuple]
    strides: Any
    bufs: dict[tuple, Any]
    buf_ptrs: dict[tuple, int]
    packed: dict[tuple, Any]
    split: dict[tuple, Any]
    piece_bytes: int
    stmts: dict[int, tuple[Any, Any]]
    _run: Callable[[int, Any], None]  # run statement `sid` on `boxes` (None: its whole box)

    def _face_box(self, a: int, start: int, stop: int) -> tuple[slice, ...]:
        """Where the face ``[start, stop)`` of axis ``a`` lies: along every other axis,
        the layers that hold grid points (the owned ones, and the ghosts on a side with a
        neighbour, which carry corners when axes are exchanged in turn). The ghosts on a
        side without one lie outside the grid: nothing there is worth sending, and a tile
        spanning the whole last axis holds no memory of its own there (its ghost columns
        alias the ends of the adjacent rows: ``layout.whole_rows``), so a face unpacked
        with them would write stale points into the receiver's owned rows."""
        box = []
        for k, (g, n) in enumerate(zip(self.ghosts, self.size)):
            if k == a:
                box.append(slice(start, stop))
            else:
                box.append(slice(0 if (k, -1) in self.chan else g, g + n + (g if (k, 1) in self.chan else 0)))
        return tuple(box)

    def _face(self, f: int, a: int, start: int, stop: int) -> Any:
        return self.arrays[f][self._face_box(a, start, stop)]

    async def _exchange(self, op: tuple, then: int | None) -> None:
        """Exchange ghosts (``op``), computing the interior of statement ``then``
        (which follows the exchange) while the halos travel."""
        _, items, corners = op
        d = len(self.size)
        gs = self.ghosts
        phases = [[a] for a in range(d)] if corners else [list(range(d))]
        overlap = then is not None and not corners
        for phase in phases:
            out, into = [], []
            for f, lo, hi in items:
                for a in phase:
                    low, high = self.chan.get((a, -1)), self.chan.get((a, 1))
                    g = gs[a]
                    if low is not None and hi[a]:
                        out.append((low, self._outgoing(f, a, g, g + hi[a])))
                    if high is not None and lo[a]:
                        out.append((high, self._outgoing(f, a, g + self.size[a] - lo[a], g + self.size[a])))
                    if low is not None and lo[a]:
                        into.append((low, f, a, g - lo[a], g))
                    if high is not None and hi[a]:
                        into.append((high, f, a, g + self.size[a], g + self.size[a] + hi[a]))
            if out or into:
                # device tiles: the faces (and the kernels before) are done, and no queued
                # unpacking still reads a buffer this phase receives into
                self.mem.sync()
            for ch, face in out:
                self._send(ch, face)
            rim = None
            if overlap:
                assert then is not None
                rim = self._interior_first(op, then)
            for ch, f, a, start, stop in into:
                await self._recv(ch, f, a, start, stop)
            if overlap:
                self._run(then, rim)  # type: ignore[arg-type]
        if then is not None and not overlap:
            self._run(then, None)

    def _send(self, ch: shoal.Channel, face: Any) -> None:
        """Send a (contiguous) face: a device face as one device array (its bytes do not
        travel in the message on one node); a host face in pieces below the rendezvous
        threshold. A rendezvous send returns only once the receiver has taken the data,
        and a neighbour busy in a kernel takes it only when the kernel ends: neighbours
        would compute in turn."""
        if self.mem.resident:
            ch.send(self.mem.message(face))
            return
        flat = face.reshape(-1)
        step = self._piece(flat.itemsize)
        for i in range(0, flat.size, step):
            ch.send(flat[i:i + step])

    def _slab(self, f: int, start: int, stop: int) -> Any:
        """Layers ``[start, stop)`` of the outer axis, as one contiguous array (whole
        padded rows: neighbours along the outer axis have the same row layout; rows of
        ``layout.whole_rows`` hold the owned columns only, so the aliased ghost columns
        never travel)."""
        return self.arrays[f][start:stop] if len(self.size) == 1 else self.raw[f][start:stop]

    def _copier(self, f: int, a: int, start: int, stop: int) -> tuple | None:
        """The generated (pack, unpack) functions and their arguments for one face of an
        inner axis; None without compiled kernels (NumPy copies the face then)."""
        key = (f, a, start, stop)
        args = self.copy_args.get(key)
        if args is None:
            if self.spec.backend != "c":
                return None
            d = len(self.size)
            arr = self.arrays[f]
            box = self._face_box(a, start, stop)
            b = [s.start for s in box]
            n = [s.stop - s.start for s in box]
            pack, unpack = load_copy(d, self.spec.dtypes[f], self.spec.cflags)
            args = self.copy_args[key] = (pack, unpack, arr.ctypes.data, (ctypes.c_long * d)(*b),
                                          (ctypes.c_long * d)(*n), tuple(n))
        return args

    def _outgoing(self, f: int, a: int, start: int, stop: int) -> Any:
        """A face to send, contiguous: an outer-axis face is sent as it lies; the others
        are packed into a new buffer (the transport may still hold the last one), or on
        a device into this face's own buffer (a device array is copied out at the send)."""
        if a == 0:
            return self._slab(f, start, stop)
        if self.mem.resident:
            key = (f, a, start, stop)
            face = self._face(f, a, start, stop)
            buf = self.packed.get(key)
            if buf is None:
                buf = self.packed[key] = self.mem.empty(face.shape, face.dtype)
            self.mem.copy(buf, face)
            return buf
        c = self._copier(f, a, start, stop)
        if c is None:
            return np.ascontiguousarray(self._face(f, a, start, stop))
        pack, _, ptr, b, n, shape = c
        buf = np.empty(shape, self.arrays[f].dtype)
        pack(ptr, buf.ctypes.data, b, n, self.strides)
        return buf

    async def _recv(self, ch: shoal.Channel, f: int, a: int, start: int, stop: int) -> None:
        key = (f, a, start, stop)
        if a == 0:
            buf = self._slab(f, start, stop)  # contiguous: receive in place
        else:
            if key not in self.bufs:
                view = self._face(f, a, start, stop)
                self.bufs[key] = self.mem.empty(view.shape, view.dtype)
                self.buf_ptrs[key] = self.mem.address(self.bufs[key])
            buf = self.bufs[key]
        if self.mem.resident:  # one device array, copied into `buf` before the receive returns
            await ch.recv(into=self.mem.message(buf))
            if a != 0:
                self.mem.copy(self._face(f, a, start, stop), buf)
            return
        flat = buf.reshape(-1)
        step = self._piece(flat.itemsize)
        for i in range(0, flat.size, step):
            await ch.recv(into=flat[i:i + step])
        if a != 0:
            c = self._copier(f, a, start, stop)
            if c is None:
                self._face(f, a, start, stop)[...] = buf
            else:
                _, unpack, ptr, b, n, _ = c
                unpack(ptr, self.buf_ptrs[key], b, n, self.strides)

    def _piece(self, itemsize: int) -> int:
        """Elements per halo message: half the eager limit of the runtime's transport."""
        if self.piece_bytes == 0:
            from ..lowlevel import current_settings

            s = current_settings("a stencil tile")
            self.piece_bytes = max(1024, min(s.rendezvous_threshold, s.frame_capacity) // 2)
        return max(1, self.piece_bytes // itemsize)

    def _interior_first(self, op: tuple, sid: int) -> list:
        """Run the part of statement ``sid`` that reads no ghost this exchange fills;
        return the boxes left (the rim) to run once the halos are in."""
        key = (op, sid)
        plan = self.split.get(key)
        if plan is None:
            plan = self.split[key] = self._split_plan(op, sid)
        interior, rim = plan
        entry, prep = self.stmts[sid]
        if prep.box is None:
            return []
        if interior is None:
            return [prep.box]
        prep.run(interior)
        return rim

    def _split_plan(self, op: tuple, sid: int) -> tuple:
        entry, prep = self.stmts[sid]
        box = prep.box
        if box is None or prep.aliased:
            return None, [box] if box is not None else []
        d = len(self.size)
        need_lo, need_hi = [0] * d, [0] * d
        exchanged = {f for f, _, _ in op[1]}
        for field, off in entry.accesses:
            if field in exchanged:
                for a, o in enumerate(off):
                    if o < 0 and (a, -1) in self.chan:
                        need_lo[a] = max(need_lo[a], -o)
                    if o > 0 and (a, 1) in self.chan:
                        need_hi[a] = max(need_hi[a], o)
        # per axis: index range [i0, i1) of the box's points whose reads stay inside the owned box
        ranges = []
        for a, ((b, n), st) in enumerate(zip(box, prep.steps)):
            first_ok = self.ghosts[a] + need_lo[a]
            last_ok = self.ghosts[a] + self.size[a] - need_hi[a]  # exclusive
            i0 = max(0, -((b - first_ok) // st))
            i1 = min(n, -((b - last_ok) // st))
            ranges.append((i0, max(i0, i1)))
        if any(i1 <= i0 for i0, i1 in ranges) or all(r == (0, n) for r, (_, n) in zip(ranges, box)):
            return None, [box]
        interior = tuple((b + st * i0, i1 - i0) for (b, _), st, (i0, i1) in zip(box, prep.steps, ranges))
        rim = []
        # the box minus the interior: for each axis, the slabs below and above it, with the
        # earlier axes limited to the interior range and the later axes whole
        for a in range(d):
            (b, n), st, (i0, i1) = box[a], prep.steps[a], ranges[a]
            for lo_i, hi_i in ((0, i0), (i1, n)):
                if hi_i <= lo_i:
                    continue
                part = []
                for k in range(d):
                    if k < a:
                        part.append(interior[k])
                    elif k == a:
                        part.append((b + st * lo_i, hi_i - lo_i))
                    else:
                        part.append(box[k])
                rim.append(tuple(part))
        return interior, rim

