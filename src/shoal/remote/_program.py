"""The program each PE of a ``shoal serve`` job runs: PE 0 serves, the others compute.

``shoal serve`` launches it (``python -m shoal .../_program.py OPTIONS``); it is a file,
not a module, because PEs run programs by path."""

import argparse
import os
import signal
import sys

if sys.path and sys.path[0] == os.path.dirname(os.path.abspath(__file__)):
    del sys.path[0]  # run by path: this package's modules must not shadow the clients' imports

import shoal
from shoal import jobwatch
from shoal.remote.options import add_options, options_from
from shoal.remote.server import serve

parser = argparse.ArgumentParser(prog="shoal serve")
add_options(parser)
options = options_from(parser.parse_args(sys.argv[1:]))
if jobwatch.launcher_rank() not in (None, 0):
    # a signal stops the server on PE 0, which then ends the job on every PE
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)

shoal.start(lambda args: serve(options))
