"""``python -m shoal``: the command line (``python -m shoal prog.py`` runs a program)."""

from .cli import command

raise SystemExit(command())
