"""``python -m shoal.bench.soak …``, the same as ``shoal bench soak …``."""

import sys

from .cli import main

sys.exit(main(sys.argv[1:]))
