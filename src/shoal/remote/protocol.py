"""The wire protocol between a frontend and a ``shoal serve`` backend (docs/server.md).

A connection starts with a fixed 72-byte greeting: the 8-byte magic ``SHOAL`` plus the
protocol version, then the 64-character token. The server compares the token in
constant time before it parses anything else and answers one byte (``OK`` or
``DENIED``). From then on both sides send frames: a 17-byte header (kind, request
id, payload length; network order) and the payload. The first frame each way is a
``HELLO`` with the versions as JSON; every later payload is a pickle (protocol 5)
with its large buffers sent out of band, so arrays cross the link without copies.
"""

from __future__ import annotations

import hmac
import io
import json
import os
import pickle
import socket
import struct
from pathlib import Path
from typing import Any

from ..errors import ShoalError

__all__ = [
    "PROTOCOL", "MAGIC", "TOKEN_CHARS", "GREETING", "OK", "DENIED", "HEADER", "Kind",
    "ServerError", "AuthenticationError", "ProtocolError", "VersionMismatchError",
    "new_token", "token_matches", "encode", "decode", "runtime_dir", "write_connection_file",
    "read_connection_file", "versions",
]

PROTOCOL = 1
MAGIC = b"SHOAL\x00\x00" + bytes((PROTOCOL,))
TOKEN_CHARS = 64
GREETING = len(MAGIC) + TOKEN_CHARS
OK, DENIED = b"\x01", b"\x00"
#: kind (1 byte), request id (8), payload length (8)
HEADER = struct.Struct("!BQQ")
_COUNTS = struct.Struct("!I")
_LENGTH = struct.Struct("!Q")


class Kind:
    """Frame kinds: client to server, then server to client."""

    HELLO = 1
    CALL = 2  # a request with a reply
    CAST = 3  # a request whose only reply is an error, if it fails
    CANCEL = 4  # interrupt request ``rid`` (not started: dropped; waiting on a future: raised in)
    INFO = 5  # the server's state, answered at once by its socket thread (a RESULT)
    RESULT = 10
    ERROR = 11
    OUTPUT = 12  # text the request's code printed: payload = stream (1 byte) + UTF-8 text

    CLIENT = frozenset({HELLO, CALL, CAST, CANCEL, INFO})


class ServerError(ShoalError):
    """The link to a ``shoal serve`` backend failed: it cannot be reached, closed, or broke
    the protocol."""


class AuthenticationError(ServerError):
    """The server refused the token."""


class ProtocolError(ServerError):
    """A peer sent something the protocol does not allow."""


class VersionMismatchError(ServerError):
    """Client and server run different versions of shoal or Python (code travels by value)."""


def new_token() -> str:
    """A fresh random token: 64 hexadecimal characters (256 bits)."""
    import secrets

    return secrets.token_hex(TOKEN_CHARS // 2)


def token_matches(given: bytes, token: str) -> bool:
    """Compare in constant time (no early exit a timing attack could measure)."""
    return hmac.compare_digest(given, token.encode("ascii"))


def versions() -> dict[str, Any]:
    """What both sides must agree on: shoal's version, Python's, and the protocol's."""
    import sys

    from ..version import __version__

    return {"protocol": PROTOCOL, "shoal": __version__, "python": "%d.%d" % sys.version_info[:2]}


def mismatch(mine: dict, theirs: dict, me: str, them: str) -> str | None:
    """A message naming both versions if ``mine`` and ``theirs`` cannot work together."""
    for key in ("protocol", "shoal", "python"):
        if mine.get(key) != theirs.get(key):
            return (f"version mismatch: the {me} runs shoal {mine.get('shoal')} (Python {mine.get('python')}, "
                    f"protocol {mine.get('protocol')}) and the {them} shoal {theirs.get('shoal')} (Python "
                    f"{theirs.get('python')}, protocol {theirs.get('protocol')}); code and data travel by value, "
                    "so both must run the same versions")
    return None


# -- payloads ----------------------------------------------------------------------
def encode(obj: Any, by_value: bool = False) -> list:
    """``obj`` as payload parts: counts, lengths, the pickle, then each large buffer.

    ``by_value``: pickle with cloudpickle (functions and classes of the client's
    ``__main__`` travel by value)."""
    buffers: list = []
    stream = io.BytesIO()
    if by_value:
        import cloudpickle

        cloudpickle.Pickler(stream, protocol=5, buffer_callback=buffers.append).dump(obj)
    else:
        pickle.Pickler(stream, protocol=5, buffer_callback=buffers.append).dump(obj)
    raws = [b.raw() for b in buffers]
    head = _COUNTS.pack(len(raws)) + b"".join(_LENGTH.pack(r.nbytes) for r in (stream.getbuffer(), *raws))
    return [head, stream.getbuffer(), *raws]


def decode(payload: bytearray | memoryview) -> Any:
    """The object of a payload made by :func:`encode` (arrays share the payload's memory)."""
    view = memoryview(payload)
    try:
        (n,) = _COUNTS.unpack_from(view, 0)
        offset = _COUNTS.size
        lengths = [_LENGTH.unpack_from(view, offset + 8 * i)[0] for i in range(n + 1)]
    except struct.error:
        raise ProtocolError("payload too short for its own table of buffers") from None
    offset += 8 * (n + 1)
    parts = []
    for length in lengths:
        if offset + length > len(view):
            raise ProtocolError("payload shorter than its table of buffers says")
        parts.append(view[offset:offset + length])
        offset += length
    return pickle.loads(parts[0], buffers=parts[1:])


def payload_size(parts: list) -> int:
    return sum(memoryview(p).nbytes for p in parts)


def frame(kind: int, rid: int, parts: list) -> list:
    """A whole frame: the header, then the payload parts."""
    return [HEADER.pack(kind, rid, payload_size(parts)), *parts]


# -- connection files ---------------------------------------------------------------
def runtime_dir() -> Path:
    """Where connection files go: ``$XDG_RUNTIME_DIR/shoal``, else ``~/.local/share/shoal/runtime``
    (created private to the user)."""
    base = os.environ.get("XDG_RUNTIME_DIR")
    folder = Path(base) / "shoal" if base else Path.home() / ".local" / "share" / "shoal" / "runtime"
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    return folder


def write_connection_file(path: Path, info: dict) -> None:
    """Write ``info`` as JSON to a new file only the user can read (mode 0600)."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump(info, f, indent=1)
    os.replace(tmp, path)


def read_connection_file(path: str | os.PathLike) -> dict:
    """The server information in a connection file (a clear error if it is not one)."""
    try:
        with open(path) as f:
            info = json.load(f)
    except FileNotFoundError:
        raise ServerError(f"no connection file at {path}: is the server running (`shoal serve`)?") from None
    except (OSError, ValueError) as exc:
        raise ServerError(f"cannot read the connection file {path}: {exc}") from None
    missing = {"host", "port", "token"} - set(info)
    if missing:
        raise ServerError(f"{path} is not a shoal connection file (it lacks {', '.join(sorted(missing))})")
    return info


def newest_connection_file() -> Path:
    """The connection file of the most recently started server of this user."""
    found = sorted(runtime_dir().glob("server-*.json"), key=lambda p: p.stat().st_mtime)
    if not found:
        raise ServerError(f"no shoal server is running for this user (no connection file in {runtime_dir()}); "
                          "start one with `shoal serve -n 4`, or pass its connection file or address")
    return found[-1]


def tune(sock: socket.socket) -> None:
    """Small frames go out at once (the protocol is request/reply)."""
    try:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    except OSError:  # not TCP
        pass
