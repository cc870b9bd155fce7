"""``shoal bench checkpoint``: checkpoint write and restart read bandwidth against NumPy's own files.

:mod:`.cli` starts the jobs; :mod:`.worker` is the shoal program they run.
"""
