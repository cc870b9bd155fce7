"""OSU-style micro-benchmarks: ``shoal bench micro`` (see docs/benchmarks.md).

The modules, each with one job: ``catalog`` (the tests), ``targets`` (the systems
under test), ``options`` (the command line), ``data`` (patterns and expected
contents), ``buffers`` (buffer kinds, CPU and GPU), ``osu`` (outputs and parser),
``report`` (printing), ``cli`` (launching), and one module per target.
"""
