"""shoal's version: one place, below every layer, for the package and what it writes (checkpoints, reports, the server's hello)."""

__all__ = ["__version__"]

__version__ = "0.1.0"
