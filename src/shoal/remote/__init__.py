"""shoal.remote: drive a running shoal job from a notebook or a script (docs/server.md).

``shoal serve -n 4`` starts a backend job; :func:`connect` links a frontend to it.
The link runs stencils (``interface=conn``) and whole programs (:meth:`Connection.run`),
and ``%load_ext shoal`` adds the ``%%shoal`` cell magic.

The names load on first use (PEP 562): ``shoal run`` builds its command line with
``shoal.remote.server``'s options without importing the client (NumPy and the
stencil DSL) it would not use.
"""

from __future__ import annotations

from .._lazy_names import lazy_names as _lazy_names

__all__ = ["connect", "local", "Connection", "RemoteFuture", "ServerError", "AuthenticationError",
           "ProtocolError", "VersionMismatchError"]

_LAZY = {"connect": ".client", "local": ".client", "Connection": ".client", "RemoteFuture": ".client",
         "ServerError": ".protocol", "AuthenticationError": ".protocol", "ProtocolError": ".protocol",
         "VersionMismatchError": ".protocol"}


__getattr__, __dir__ = _lazy_names(__name__, globals(), _LAZY)  # each public name loaded on first use
