"""``shoal bench balance``: what load balancing buys, and how fast elements move.

:mod:`.cli` starts the jobs; :mod:`.worker` is the shoal program each job runs.
"""
