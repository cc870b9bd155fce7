"""``charm4py.threads``: the Future class that Charm4py programs test against."""

from ..._runtime.futures import Future

__all__ = ["Future"]
