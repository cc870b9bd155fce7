"""The wire's vocabulary: what a message asks its receiver to do, and the collection ids
that name no collection of the program. Below every module that sends or handles messages
(``message.py`` defines the rest of the format; ``core.h`` the same numbers in C)."""

from __future__ import annotations

from enum import IntEnum

__all__ = ["Kind", "SYSTEM_ID", "NO_COLL"]

SYSTEM_ID = 0  # the system group's collection (system.py)
NO_COLL = 1  # the collection field of messages that belong to no collection (futures)


class Kind(IntEnum):
    """What a message asks its receiver to do."""

    INVOKE = 0  # run an entry method on one element
    BROADCAST = 1  # run an entry method on every element (travels down a tree)
    MULTICAST = 2  # run an entry method on the listed local elements of a section
    FUTURE = 3  # resolve a future owned by the receiver (entry: its sender PE + 1, or 0 if not said)
    REDUCE = 4  # a partial reduction result going up a tree
    RESULT = 5  # an all-reduce result going down a tree
    CREATE = 6  # make a collection known (and its local elements) on a PE
    INSERT = 7  # make one element of a sparse array
    CHANNEL = 8  # one channel message to an element
    LOCATION = 9  # an element's current PE, for the sender's cache
    EXCHANGE = 10  # one round of a butterfly all-reduce between two PEs
    AWAIT = 11  # send the value of the receiver's future (aux) to a future of the sender
    MIGRATE = 12  # an element moving to the receiver (its state in the payload)
    FENCE = 13  # the sender's last message to an element by its old route (see migration.py)
    BALANCE = 14  # a step of a balancing round (entry: the phase; see balancing.py)
    DEVICE = 15  # the receiver copied device buffer ``aux`` the sender lent it (see devices.py)
