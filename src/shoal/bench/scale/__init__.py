"""``shoal bench scale``: what a million elements and a job's start-up cost (see :mod:`.cli`)."""
