"""shoal.remote: drive a running shoal job from a notebook or a script (docs/server.md).

``shoal serve -n 4`` starts a backend job; :func:`connect` links a frontend to it.
The link runs stencils (``interface=conn``) and whole programs (:meth:`Connection.run`),
and ``%load_ext shoal`` adds the ``%%shoal`` cell magic.
"""

from .client import Connection, RemoteFuture, connect, local
from .protocol import AuthenticationError, ProtocolError, ServerError, VersionMismatchError

__all__ = ["connect", "local", "Connection", "RemoteFuture", "ServerError", "AuthenticationError",
           "ProtocolError", "VersionMismatchError"]
