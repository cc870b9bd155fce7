"""Benchmarks of shoal against mpi4py and other peers (``shoal bench …``)."""
