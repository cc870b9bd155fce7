"""``shoal bench soak``: migration and load balancing under load, every invariant checked
(:mod:`.cli` runs the jobs, :mod:`.program` is the shoal program of one job)."""
