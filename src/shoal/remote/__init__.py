"""shoal.remote: drive a running shoal job from a notebook or a script (docs/server.md).

``shoal serve -n 4`` starts a backend job; :func:`connect` links a frontend to it.
The link runs stencils (``interface=conn``) and whole programs (:meth:`Connection.run`),
and ``%load_ext shoal`` adds the ``%%shoal`` cell magic.

The names load on first use (PEP 562): ``shoal run`` builds its command line with
``shoal.remote.server``'s options without importing the client (NumPy and the
stencil DSL) it would not use.
"""

from __future__ import annotations

from typing import Any as _Any

__all__ = ["connect", "local", "Connection", "RemoteFuture", "ServerError", "AuthenticationError",
           "ProtocolError", "VersionMismatchError"]

_LAZY = {"connect": ".client", "local": ".client", "Connection": ".client", "RemoteFuture": ".client",
         "ServerError": ".protocol", "AuthenticationError": ".protocol", "ProtocolError": ".protocol",
         "VersionMismatchError": ".protocol"}


def __getattr__(name: str) -> _Any:
    """Load a public name on first use, then keep it here."""
    where = _LAZY.get(name)
    if where is None:
        raise AttributeError(f"module 'shoal.remote' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(where, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})
