"""shoal.remote: drive a running shoal job from a notebook or a script (docs/server.md).

``shoal serve -n 4`` starts a backend job; :func:`connect` links a frontend to it.
The link runs stencils (``interface=conn``) and whole programs (:meth:`Connection.run`),
and ``%load_ext shoal`` adds the ``%%shoal`` cell magic.

The names load on first use (PEP 562): ``shoal run`` builds its command line with
``shoal.remote.server``'s options without importing the client (NumPy and the
stencil DSL) it would not use.
"""

from __future__ import annotations

# ruff: noqa: F401  - the imports here are the names this package offers, not names it uses
from .._lazy_names import lazy_names as _lazy_names

_TYPE_CHECKING = False  # typing is for type checkers: `shoal run` skips its import
#: the names, each imported from the module that defines it: the one list of them. Type
#: checkers read these imports; a running program skips them and loads each name on first
#: use instead (shoal/_lazy_names.py reads this block), then keeps it here.
if _TYPE_CHECKING:
    from .client import connect, local, Connection, RemoteFuture
    from .protocol import ServerError, AuthenticationError, ProtocolError, VersionMismatchError

__getattr__, __dir__ = _lazy_names(globals())  # each name loaded on first use; __all__: all of them
