"""``charm4py.threads``: the Future class that Charm4py programs test against, and
``NotThreadedError``, what a wait outside a ``@coro``/``@threaded`` method raises."""

from ...errors import BlockingCallError as NotThreadedError
from ... import Future

__all__ = ["Future", "NotThreadedError"]
