"""``shoal serve``'s options: parsed by the command line of the launcher and of each PE, so
they live apart from the server (whose asyncio and ssl imports ``shoal run`` need not pay)."""

from __future__ import annotations

import argparse
import os
from typing import Any, NamedTuple

__all__ = ["ServerOptions", "add_options", "options_from"]


class ServerOptions(NamedTuple):
    """``shoal serve``'s options (see ``shoal serve --help``)."""

    host: str = "127.0.0.1"
    port: int = 0
    connection_file: str | None = None
    idle_timeout: float = 0.0  # seconds without a client before the server stops; 0: never
    tls_cert: str | None = None
    tls_key: str | None = None
    max_message: int = 2 << 30
    auth_timeout: float = 10.0  # seconds a new connection has to send its greeting
    stall_timeout: float = 60.0  # seconds a frame may stall halfway
    max_queued: int = 256  # a client's requests waiting or running before its socket is not read
    parent_pid: int = 0  # stop when this process ends (shoal.remote.local's frontend)


def add_options(p: Any) -> None:
    """``shoal serve``'s server options, on an argparse parser (the CLI's and each PE's)."""
    p.add_argument("--host", default="127.0.0.1",
                   help="address to listen on (default 127.0.0.1: this machine only; anything else warns)")
    p.add_argument("--port", type=int, default=0, help="TCP port (default: any free one)")
    p.add_argument("--connection-file", metavar="PATH", default=None,
                   help="where to write the address and token, mode 0600 (default: "
                        "$XDG_RUNTIME_DIR/shoal/server-PID.json)")
    p.add_argument("--idle-timeout", metavar="SECONDS", type=float, default=0.0,
                   help="stop after this long with no client connected (default 0: never)")
    p.add_argument("--tls-cert", metavar="PEM", default=None, help="serve over TLS with this certificate")
    p.add_argument("--tls-key", metavar="PEM", default=None, help="the certificate's private key")
    p.add_argument("--max-message", metavar="BYTES", type=_size, default=ServerOptions._field_defaults["max_message"],
                   help="largest frame a client may send, e.g. 512M or 4G (default 2G)")
    p.add_argument("--auth-timeout", metavar="SECONDS", type=float, default=ServerOptions._field_defaults["auth_timeout"],
                   help="seconds a new connection has to authenticate (default 10)")
    p.add_argument("--parent-pid", type=int, default=0, help=argparse.SUPPRESS)


def _size(text: str) -> int:
    scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:].upper(), 1)
    digits = text[:-1] if scale > 1 else text
    if not digits.isdigit() or int(digits) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a size such as 65536, 512M or 2G")
    return int(digits) * scale


def options_from(ns: Any) -> ServerOptions:
    """The :class:`ServerOptions` of parsed arguments; a clear error for TLS half given."""
    if bool(ns.tls_cert) != bool(ns.tls_key):
        raise SystemExit("shoal serve: --tls-cert and --tls-key go together (the certificate and its key)")
    return ServerOptions(host=ns.host, port=ns.port, connection_file=ns.connection_file and
                         os.path.abspath(ns.connection_file), idle_timeout=ns.idle_timeout, tls_cert=ns.tls_cert,
                         tls_key=ns.tls_key, max_message=ns.max_message, auth_timeout=ns.auth_timeout,
                         parent_pid=ns.parent_pid)
