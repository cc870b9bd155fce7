"""The shoal runtime: chares, collections, proxies, futures, reductions, channels."""
