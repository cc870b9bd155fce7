"""Checkpoints on disk as the command line reads them, with no job running: the newest
one in a folder (``shoal run --max-restarts``), its manifest checked, every file verified
(``shoal checkpoint inspect``), and the command that resumes from it. The format is the
runtime's (``_runtime/checkpoint.py``); these read it and promise to keep reading it."""

from __future__ import annotations

from .._runtime.checkpoint import AUTO as RESTART_AUTO
from .._runtime.checkpoint import latest as newest_checkpoint
from .._runtime.checkpoint import read_manifest, resume_command
from .._runtime.checkpoint import verify as verify_checkpoint

__all__ = ["RESTART_AUTO", "newest_checkpoint", "read_manifest", "verify_checkpoint", "resume_command"]
