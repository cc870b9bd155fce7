"""``%load_ext shoal``: the ``%%shoal`` cell magic runs a notebook cell on a shoal server.

``%shoal connect [TARGET]`` links the notebook to a server (``shoal serve``'s
connection file, ``host:port``, or nothing for the newest); ``%shoal local N`` starts a
private one of N PEs. Then each ``%%shoal`` cell runs on the server's PE 0 in the
notebook's own namespace there; what it prints appears as it is printed, and the
value of its last line is the cell's value.
"""

from __future__ import annotations

import shlex
from typing import Any

from .client import Connection, connect, local

__all__ = ["load_ipython_extension", "current_connection"]

_connection: Connection | None = None


def current_connection() -> Connection:
    """The connection ``%%shoal`` cells use (made by ``%shoal connect``, or connecting to
    the newest server on first use)."""
    global _connection
    if _connection is None or _connection._closed:
        _connection = connect()
    return _connection


def _line(line: str) -> Any:
    global _connection
    words = shlex.split(line)
    if not words or words[0] not in ("connect", "local", "close", "info"):
        raise ValueError("%shoal connect [FILE | HOST:PORT [TOKEN]] | local [PES] | info | close")
    if words[0] == "close":
        if _connection is not None:
            _connection.close()
            _connection = None
        return None
    if words[0] == "info":
        return current_connection().info()
    if _connection is not None:
        _connection.close()
    if words[0] == "local":
        _connection = local(int(words[1]) if len(words) > 1 else 2)
    else:
        _connection = connect(words[1] if len(words) > 1 else None, words[2] if len(words) > 2 else None)
    return _connection


def _cell(line: str, cell: str) -> Any:
    return current_connection().exec(cell)


def load_ipython_extension(ipython: Any) -> None:
    """Register ``%shoal`` and ``%%shoal`` (called by ``%load_ext shoal``)."""
    ipython.register_magic_function(_line, "line", "shoal")
    ipython.register_magic_function(_cell, "cell", "shoal")
