"""The compiled path's copy of the wire format agrees with the Python definition.

``src/shoal/_native`` declares the wire format a second time, as ``#define``s: the
header layout, the message kinds and flags, the system collection ids, the frame
prefix and tag, the channel sequence wrap. These tests parse those ``#define``s and
fail, naming the constant, where one disagrees with the Python it mirrors
(``_runtime/message.py``, ``_runtime/system.py``, ``_runtime/channels.py``,
``_transport/mpi.py``). They need neither a compiler nor MPI.
"""

from __future__ import annotations

import ast
import re
import struct
from collections import deque
from pathlib import Path
from typing import Any, Callable

import pytest

import shoal
from shoal._runtime import balancing, futures, message, reductions, system
from shoal._runtime.channels import Channel
from shoal._runtime.message import Kind

PACKAGE = Path(shoal.__file__).resolve().parent
NATIVE = PACKAGE / "_native"

#: `#define NAME <integer>` (decimal or hex, optional suffix and trailing comment)
_DEFINE = re.compile(r"^[ \t]*#[ \t]*define[ \t]+([A-Za-z_]\w*)[ \t]+\(?(-?(?:0[xX][0-9a-fA-F]+|\d+))[uUlL]*\)?[ \t]*(?:/\*.*|//.*)?$", re.M)
#: the C type each header field is read and written as (make_header, core_deliver)
_HEADER_FIELDS = {"H_KIND": "B", "H_RANK": "B", "H_ENTRY": "H", "H_SRC": "I", "H_AUX": "I", "H_COLL": "Q"}


def c_defines() -> dict[str, tuple[int, str]]:
    """Every integer ``#define`` of the compiled sources: name -> (value, file)."""
    found: dict[str, tuple[int, str]] = {}
    for path in sorted(NATIVE.glob("*.[ch]")):
        for m in _DEFINE.finditer(path.read_text()):
            name, value = m.group(1), int(m.group(2), 0)
            if name in found and found[name][0] != value:
                raise AssertionError(f"{name} is {found[name][0]} in {found[name][1]} but {value} in {path.name}")
            found.setdefault(name, (value, path.name))
    return found


def transport_constants() -> dict[str, Any]:
    """The module-level constants of _transport/mpi.py, read from its source: importing it
    would start MPI in the test process."""
    out: dict[str, Any] = {}
    for node in ast.parse((PACKAGE / "_transport" / "mpi.py").read_text()).body:
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)):
            continue
        name, value = node.targets[0].id, node.value
        if isinstance(value, ast.Constant):
            out[name] = value.value
        elif (isinstance(value, ast.Call) and ast.unparse(value.func) == "struct.Struct" and len(value.args) == 1
              and isinstance(value.args[0], ast.Constant)):
            out[name] = struct.Struct(str(value.args[0].value))
    return out


def header_offsets() -> list[int]:
    """The byte offset of each field of message.HEADER."""
    fmt = message.HEADER.format
    order, codes = fmt[0], fmt[1:]
    return [struct.calcsize(order + codes[:i]) for i in range(len(codes))]


def channel_wrap() -> tuple[int, int]:
    """The masks Channel.sent and Channel.arrived wrap with (2**16 - 1 for 16 bits),
    found by sending and arriving on a bare channel: the largest n = 2**k - 1 for
    which the number after n is 0."""

    class Runtime:  # what Channel._send calls
        pe = 0

        def send_channel(self, remote: object, tag: int, seq: int, flag: int, segments: list) -> None:
            pass

    ch: Any = Channel.__new__(Channel)
    ch.chare, ch.remote, ch.tag, ch._rt = None, None, 1, Runtime()
    ch.waiting, ch.into, ch.landed, ch.inbox, ch.ahead = None, None, False, deque(), None
    masks = []
    for attr, step in (("sent", lambda: ch._send(0)), ("arrived", lambda: ch.arrive(ch.arrived, 0, [b""]))):
        mask = 0
        for bits in range(1, 64):
            mask = (1 << bits) - 1
            setattr(ch, attr, mask)
            step()
            if getattr(ch, attr) == 0:
                break
        masks.append(mask)
    return masks[0], masks[1]


def expected() -> dict[str, tuple[str, int]]:
    """C constant -> (the Python definition it mirrors, its value)."""
    mpi = transport_constants()
    offsets = header_offsets()
    want: dict[str, tuple[str, int]] = {
        "HSIZE": ("message.HEADER.size", message.HEADER.size),
        "MAX_INDEX": ("len(message.INDEX_STRUCTS) - 1", len(message.INDEX_STRUCTS) - 1),
        "KIND_ARRAYS": ("message.ARRAYS", message.ARRAYS),
        "KIND_KWARGS": ("message.KWARGS", message.KWARGS),
        "KIND_MASK": ("message.KIND_MASK", message.KIND_MASK),
        "KIND_FWD": ("message.FWD", message.FWD),
        "SYSTEM_ID": ("system.SYSTEM_ID", system.SYSTEM_ID),
        "NO_COLL": ("system.NO_COLL", system.NO_COLL),
        "FRAME_TAG": ("transport.mpi._FRAME_TAG", mpi["_FRAME_TAG"]),
        "FRAME_PREFIX": ("transport.mpi._PREFIX.size", mpi["_PREFIX"].size),
        "FRAME_SEG": ("transport.mpi._SEG.size", mpi["_SEG"].size),
        "SEQ_MASK": ("the wrap of Channel.sent (Channel._send)", channel_wrap()[0]),
        "COMM_SAMPLE": ("balancing.COMM_SAMPLE", balancing.COMM_SAMPLE),
        "RET_GATHER": ("reductions.RET_GATHER", reductions.RET_GATHER),
        "RET_BLOCK": ("reductions.RET_BLOCK", reductions.RET_BLOCK),
        "TO_FUTURE": ("reductions.TO_FUTURE", reductions.TO_FUTURE),
    }
    for i, name in enumerate(_HEADER_FIELDS):
        want[name] = (f"the offset of field {i} of message.HEADER ({message.HEADER.format})", offsets[i])
    for kind in Kind:
        want[f"KIND_{kind.name}"] = (f"message.Kind.{kind.name}", int(kind))
    return want


def test_c_constants_match_python() -> None:
    defines = c_defines()
    want = expected()
    mirrored = {name for name in defines if name in want}
    # every flag and kind the C code declares must have a Python counterpart to check
    unknown = sorted(n for n in defines if n.startswith("KIND_") and n not in want)
    assert not unknown, f"C constants with no Python definition to check against: {unknown}"
    missing = sorted({"HSIZE", "MAX_INDEX", "KIND_ARRAYS", "KIND_KWARGS", "KIND_MASK", "KIND_FWD", "SYSTEM_ID", "NO_COLL",
                      "FRAME_TAG", "FRAME_PREFIX", "FRAME_SEG", "SEQ_MASK", "COMM_SAMPLE", "RET_GATHER", "RET_BLOCK",
                      "TO_FUTURE", *_HEADER_FIELDS} - mirrored)
    assert not missing, f"C constants this test checks were not found in {NATIVE}: {missing}"
    wrong = [
        f"{name} = {defines[name][0]} in {defines[name][1]}, but {want[name][0]} = {want[name][1]}"
        for name in sorted(mirrored)
        if defines[name][0] != want[name][1]
    ]
    assert not wrong, "the compiled path's wire format disagrees with Python:\n" + "\n".join(wrong)


@pytest.mark.parametrize(
    "what, python, c_layout",
    [
        ("message.HEADER", lambda: message.HEADER.format, "<" + "".join(_HEADER_FIELDS.values())),
        ("transport.mpi._PREFIX", lambda: transport_constants()["_PREFIX"].format, "<HH"),
        ("transport.mpi._SEG", lambda: transport_constants()["_SEG"].format, "<Q"),
    ],
)
def test_struct_layouts_are_what_the_c_code_reads(what: str, python: Callable[[], str], c_layout: str) -> None:
    """The C code reads these structures with fixed-width integer types (core.h, native.h)."""
    assert python() == c_layout, f"{what} is {python()!r}; the C code reads it as {c_layout!r}"


def test_index_is_int64s() -> None:
    for n, s in enumerate(message.INDEX_STRUCTS):
        assert s.format == f"<{n}q", f"message.INDEX_STRUCTS[{n}] is {s.format!r}; the C code packs <{n}q"


def test_channel_sequence_wrap() -> None:
    """Both ends of the Python channel wrap where the C code does, and the number fits
    the header's entry field that carries it."""
    sent, arrived = channel_wrap()
    mask = c_defines()["SEQ_MASK"][0]
    assert sent == mask, f"SEQ_MASK = {mask:#x}, but Channel._send wraps Channel.sent at {sent + 1:#x}"
    assert arrived == mask, f"SEQ_MASK = {mask:#x}, but Channel.arrive wraps Channel.arrived at {arrived + 1:#x}"
    width = struct.calcsize("<" + message.HEADER.format[1 + list(_HEADER_FIELDS).index("H_ENTRY")])
    assert mask == (1 << 8 * width) - 1, f"SEQ_MASK = {mask:#x} does not fill the {width}-byte entry field"


def test_future_states_come_from_python() -> None:
    """The C code holds no future state numbers: make_core passes futures._PENDING and
    _DONE to Core() (last), and only core.h's accessors touch Future._state."""
    for path in sorted(NATIVE.glob("*.[ch]")):
        for lineno, line in enumerate(path.read_text().splitlines(), 1):
            if "shoal_slots.future_state" in line and path.name not in ("core.h", "core.c", "tasks.c"):
                raise AssertionError(f"{path.name}:{lineno} uses Future._state directly: {line.strip()}")
    tree = ast.parse((PACKAGE / "_runtime" / "core_contract.py").read_text())
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and ast.unparse(n.func) == "module.Core"]
    assert len(calls) == 1, "core_contract.py should construct module.Core once"
    assert [ast.unparse(a) for a in calls[0].args[-2:]] == ["_PENDING", "_DONE"], "Core(..., _PENDING, _DONE)"
    assert len({futures._PENDING, futures._DONE, futures._FAILED}) == 3


@pytest.mark.mpi
def test_frames_not_matching_their_prefix_go_to_python(mpi_job: Callable[..., Any]) -> None:
    """The compiled receive delivers a frame itself only when every segment its prefix
    lists lies inside it; any other frame goes to the Python path, which unpacks it."""
    job = mpi_job(
        """
        import struct
        from collections import deque
        from mpi4py import MPI
        from shoal.native import load_native, native_status
        from shoal._transport.mpi import _FRAME_TAG

        m = load_native()
        assert m is not None, native_status()
        comm = MPI.COMM_WORLD.Dup()
        frames = m.Frames(comm, 4096, 1024)
        got = []
        deliver = lambda header, segs: got.append(("deliver", header, [bytes(s) for s in segs]))
        slow = lambda src, frame: got.append(("slow", bytes(frame)))
        assert frames.send(0, b"HDR", [b"abc", b"de"])  # well formed: delivered by C
        bad = [
            struct.pack("<HHQ", 3, 1, 1000 << 1) + b"HDRabc",  # a segment past the end
            b"\\x01\\x00",  # shorter than the prefix
            struct.pack("<HH", 500, 0) + b"xx",  # a header past the end
        ]
        reqs = [comm.Isend(b, 0, _FRAME_TAG) for b in bad]
        n = 0
        while n < 4:
            n += frames.poll(deliver, slow, {}, deque())
        MPI.Request.Waitall(reqs)
        assert got == [("deliver", b"HDR", [b"abc", b"de"])] + [("slow", b) for b in bad], got
        frames.close()
        print("frames ok")
        """,
        n=1,
    )
    assert job.returncode == 0, job
    assert "frames ok" in job.stdout
