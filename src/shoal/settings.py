"""The one validated table of runtime options, read from ``SHOAL_*`` variables.

Each option has a type and a valid range (:data:`RANGES`); a value outside it (``nan``,
``inf``, a negative size, a flag that is neither 0 nor 1) is refused with the variable's
name, the value and the range, wherever settings are read: ``shoal run``, ``shoal info``,
``shoal.run(**options)``, ``shoal.start`` on every PE.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False  # typing is for type checkers: the launcher and a PE's start-up skip its import
if TYPE_CHECKING:
    from typing import Any, Mapping

__all__ = ["Settings", "SettingsError", "load_settings", "MAX_PES", "TRANSPORTS", "RANGES", "cache_root", "cache_limit", "mpiexec_choice"]

#: The most PEs a job may have. One in-process PE costs about 12 KiB before any chare
#: and one thread steps them all in turn, so more than this is a mistake, not a job;
#: ``shoal run`` starts every MPI PE as a process on this machine, where the same holds.
MAX_PES = 65536
_MAX_BYTES = 1 << 30  # frames are buffers on every PE, and MPI counts are C ints
#: Transport names accepted by ``shoal run --transport`` and ``SHOAL_TRANSPORT``.
TRANSPORTS = ("mpi", "inproc")


class SettingsError(ValueError):
    """A ``SHOAL_*`` variable or option is unknown, or its value is not valid."""


class Settings:
    """Runtime options; each can be set by the environment variable ``SHOAL_<NAME>``.

    Read-only once made. A plain class rather than a dataclass or a named tuple: the
    launcher and every PE read settings at start-up, before anything else would import
    ``dataclasses`` or ``typing``.
    """

    #: ``mpi`` or ``inproc``; empty means: ``mpi`` under an MPI launcher, else ``inproc``.
    transport: str = ""
    #: Number of PEs of an in-process job.
    pes: int = 1
    #: Segments of at least this many bytes move by rendezvous (zero-copy).
    rendezvous_threshold: int = 256 * 1024
    #: Largest eager frame, bytes.
    frame_capacity: int = 256 * 1024
    #: Seconds of busy polling before an idle PE starts to sleep.
    idle_spin: float = 0.002
    #: Longest sleep of an idle PE, seconds.
    idle_sleep_max: float = 0.001
    #: Yield the core while busy-polling: 1 always, 0 never, -1 when this node has more
    #: PEs than cores (so polling PEs do not starve the ones with work).
    idle_yield: int = -1
    #: Seconds the main program may wait idle before shoal checks for a deadlock.
    deadlock_timeout: float = 1.0
    #: Fan-out of the spanning trees used by broadcasts and reductions.
    tree_fanout: int = 4
    #: 1: use the compiled per-message path (C) with the MPI transport when it builds; 0: pure Python.
    native: int = 1
    #: The thread level shoal asks of MPI when it starts MPI itself. shoal calls MPI from
    #: one thread at a time, so ``serialized`` suffices, and MPICH then takes no lock
    #: around each call; ``multiple`` for programs that call MPI from threads of their own.
    mpi_threads: str = "serialized"
    #: MPI transport: how a PE takes in messages from any PE. ``standing``: a persistent
    #: any-source receive (the fastest); ``probe``: matched probes (``MPI_Improbe``), which
    #: every MPI delivers correctly across nodes (MPICH's ch4:ucx can lose messages for an
    #: any-source receive there); ``auto``: standing on one node, probe across nodes.
    receive: str = "auto"
    #: MPI transport: let the C allocator serve blocks below this many bytes from its heap
    #: and keep freed ones, so large messages land in memory already mapped instead of
    #: fresh pages (page faults halve rendezvous bandwidth); 0 leaves malloc alone.
    heap_reuse: int = 32 << 20
    #: MPI transport: a message whose rendezvous segments hold at least this many bytes,
    #: between two PEs of one node, is copied by both processes at once, each a part
    #: (Linux cross-memory attach, where the node allows it); 0: by MPI alone.
    shared_copy: int = 1 << 20
    #: Write a timeline of the job (entry methods, idle, sends, migrations, balancing) to
    #: this file, in the Chrome trace-event format Perfetto opens; empty: no tracing.
    trace: str = ""
    #: With ``trace``: seconds per time bin of a summary-mode trace (time per entry method,
    #: idle and bytes sent, per bin; bounded size however long the job); 0: every event.
    trace_summary: float = 0.0
    #: The load-balancing strategy by name; empty: none. The runtime checks the name
    #: against the strategies registered when the job starts.
    lb: str = ""
    #: With a strategy: balance at every N-th ``at_sync`` call; 0: at every one; -1
    #: (``auto``): the runtime chooses, from how fast the load drifts (``_runtime/lb_period.py``).
    lb_period: int = 0
    #: Restart from this checkpoint directory: its collections are rebuilt before main
    #: runs, and ``shoal.restarted()`` returns main's saved state; empty: a fresh start.
    restart: str = ""
    #: 1: tracebacks of user errors keep shoal's internal frames, and the MPI library's
    #: own abort message is printed; 0: the user's frames only (shoal/_runtime/tracebacks.py).
    debug: int = 0
    #: ``shoal.checkpoint_point()`` writes a checkpoint to ``checkpoint_dir`` when this many
    #: seconds passed since the last one; 0: never (the call returns at once).
    checkpoint_every: float = 0.0
    #: Where ``shoal.checkpoint_point()`` writes (``shoal run --checkpoint-dir``).
    checkpoint_dir: str = "shoal.ckpt"
    #: The GPU a PE uses: empty for its rank on the node modulo the devices it sees, else a
    #: device number or a comma list (PE k of a node takes entry k modulo its length).
    device: str = ""
    #: How device arrays travel: ``ipc``, ``staged`` or ``mpi``; empty: the best the job
    #: can take (shoal/gpu/paths.py), shown by ``shoal info``.
    gpu_path: str = ""
    #: Bytes per chunk of the pipelined host staging of device arrays.
    gpu_chunk: int = 1 << 20

    def __init__(self, **values: Any) -> None:
        for name, value in values.items():
            if name not in _DEFAULTS:
                raise TypeError(f"Settings() got an unexpected keyword argument {name!r}")
            object.__setattr__(self, name, value)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"settings are read-only: make new ones with load_settings({name}=...)")

    def as_dict(self) -> dict[str, Any]:
        """Every option's value, by name, in the order of the table above."""
        return {name: getattr(self, name) for name in _DEFAULTS}

    def __eq__(self, other: object) -> bool:
        return type(other) is Settings and self.as_dict() == other.as_dict()

    def __hash__(self) -> int:
        return hash(tuple(self.as_dict().values()))

    def __repr__(self) -> str:
        return "Settings(" + ", ".join(f"{k}={v!r}" for k, v in self.as_dict().items()) + ")"


#: every option's default, by name, in the order of the class
_DEFAULTS: dict[str, Any] = {name: getattr(Settings, name) for name in Settings.__annotations__}


class _Matching:
    """The valid values of a text option: those ``pattern`` matches whole, as ``text`` says."""

    def __init__(self, pattern: str, text: str) -> None:
        self.pattern = pattern
        self.text = text

    def __contains__(self, value: object) -> bool:
        import re  # where a text option is set: `shoal run` and a PE start without re

        return isinstance(value, str) and re.fullmatch(self.pattern, value) is not None


#: per option: ``(lowest, highest)`` or the set of allowed values, and what the value means
RANGES: dict[str, tuple[tuple | frozenset | _Matching, str]] = {
    "transport": (frozenset({"", *TRANSPORTS}),
                  "valid transports are mpi, inproc (empty: mpi under an MPI launcher, else inproc)"),
    "pes": ((1, MAX_PES), f"an in-process job needs at least 1 PE, and more than {MAX_PES} is a mistake: "
                          "each costs about 12 KiB and one thread steps them all"),
    "rendezvous_threshold": ((0, _MAX_BYTES - 4096), "bytes; smaller segments travel in eager frames, "
                                                     "a buffer of which every PE holds"),
    "frame_capacity": ((4096, _MAX_BYTES), "bytes: a frame must hold a message's header, and every PE "
                                           "holds a buffer this large"),
    "idle_spin": ((0.0, 60.0), "a number of seconds of busy polling"),
    "idle_sleep_max": ((0.0, 1.0), "seconds: an idle PE answers a message at most this late"),
    "idle_yield": (frozenset({-1, 0, 1}), "1 always, 0 never, -1 when this node has more PEs than cores"),
    "deadlock_timeout": ((0.0, 604800.0), "a number of seconds; 604800 (a week) where no check is wanted"),
    "tree_fanout": ((2, MAX_PES), "a fan-out of at least the number of PEs makes a flat tree"),
    "native": (frozenset({0, 1}), "1: the compiled per-message path, 0: pure Python"),
    "mpi_threads": (frozenset({"funneled", "serialized", "multiple"}),
                    "the MPI thread level shoal asks for (multiple: the program calls MPI from threads of its own)"),
    "receive": (frozenset({"auto", "standing", "probe"}),
                "how a PE receives from any PE: a standing receive, matched probes, or auto (probes across nodes)"),
    "heap_reuse": ((0, 2**31 - 1), "bytes; malloc takes a C int, and above 32 MiB acts as 32 MiB"),
    "shared_copy": ((0, 2**62), "bytes; 0 lets MPI alone move large messages within a node"),
    "trace": (_Matching(r"[^\x00]*", "a file name without NUL characters"),
              "the file the job's timeline is written to at its end (empty: no tracing)"),
    "trace_summary": ((0.0, 3600.0), "seconds per time bin of a summary-mode trace, e.g. 0.01 (0: every event)"),
    "lb": (_Matching(r"(?:[A-Za-z_][A-Za-z0-9_.-]*)?", "a strategy name: letters, digits, '_', '.' and '-', "
                     "starting with a letter or '_'"),
           "the load-balancing strategy, by the name it was registered under (empty: none)"),
    "lb_period": ((-1, 2**31 - 1), "a count of at_sync calls: N > 0 balances at every N-th, "
                                   "0 at every one, auto (or -1) as often as the load's drift makes it pay"),
    "checkpoint_every": ((0.0, 1e9), "seconds between the checkpoints checkpoint_point() writes (0: none)"),
    "checkpoint_dir": (_Matching(r"[^\x00]+", "a directory name without NUL characters"),
                       "the directory checkpoint_point() writes its checkpoints to"),
    "restart": (_Matching(r"[^\x00]*", "a directory name without NUL characters"),
                "a checkpoint directory written by shoal.checkpoint (empty: a fresh start)"),
    "device": (_Matching(r"(?:\d+(?:,\d+)*)?", "device numbers separated by commas, e.g. 0 or 0,1"),
               "the GPU of each PE on a node (empty: its rank on the node modulo the devices it sees)"),
    "gpu_path": (frozenset({"", "ipc", "staged", "mpi"}),
                 "how device arrays travel (empty: chosen automatically; `shoal info` shows the choice)"),
    "gpu_chunk": ((4096, 1 << 30), "bytes per chunk of pipelined host staging"),
    "debug": (frozenset({0, 1}), "1: tracebacks keep shoal's internal frames, 0: the user's frames only"),
}

#: words an option takes besides its values: option -> word -> value
_WORDS: dict[str, dict[str, object]] = {"lb_period": {"auto": -1}}

_ENV_ONLY = {  # read by the launcher, the PEs' job records and the builders, not settings
    "SHOAL_MPIEXEC", "SHOAL_CACHE_DIR", "SHOAL_CACHE_MAX_MB", "SHOAL_JOB_DIR", "SHOAL_LAUNCHER",
    "SHOAL_COMPAT",  # read by `python -m shoal` before the program starts (shoal.compat)
}


def load_settings(environ: Mapping[str, str] | None = None, **overrides: object) -> Settings:
    """Build settings from ``SHOAL_*`` variables; an unknown name or bad value is an error."""
    env = os.environ if environ is None else environ
    known = {name: type(default).__name__ for name, default in _DEFAULTS.items()}  # name -> type
    values: dict[str, object] = {}
    labels: dict[str, str] = {}
    for key, raw in env.items():
        if not key.startswith("SHOAL_") or key in _ENV_ONLY:
            continue
        name = key[len("SHOAL_") :].lower()
        if name not in known:
            valid = ", ".join("SHOAL_" + n.upper() for n in known)
            raise SettingsError(f"unknown setting {key}={raw!r}; valid settings: {valid}")
        word = _WORDS.get(name, {}).get(raw.strip().lower())
        values[name] = _convert(key, raw, known[name]) if word is None else word
        labels[name] = f"{key}={raw!r}"
    for name, value in overrides.items():
        if name not in known:
            raise SettingsError(f"unknown setting {name!r}; valid settings: {', '.join(known)}")
        word = _WORDS.get(name, {}).get(value.strip().lower()) if isinstance(value, str) else None
        if word is not None:
            values[name] = word
        else:
            values[name] = _convert(name, value, known[name]) if isinstance(value, str) else value
        kind = _KINDS[_type_name(known[name])]
        if not isinstance(values[name], kind) or isinstance(values[name], bool):
            raise SettingsError(f"setting {name}={value!r} must be a {_type_name(known[name])}")
        labels[name] = f"{name}={value!r}"
    for name, value in values.items():
        _check(name, value, labels[name])
    return Settings(**values)  # type: ignore[arg-type]


def _check(name: str, value: object, label: str) -> None:
    """Refuse ``value`` outside the valid range of option ``name``, naming both."""
    allowed, why = RANGES[name]
    if isinstance(allowed, _Matching):
        if value in allowed:
            return
        valid = allowed.text
    elif isinstance(allowed, frozenset):
        if value in allowed:
            return
        valid = "one of " + ", ".join(repr(v) for v in sorted(allowed, key=repr))
    else:
        low, high = allowed
        if not (isinstance(value, float) and not -_INF < value < _INF) and low <= value <= high:  # type: ignore[operator]
            return
        valid = f"from {low:g} to {high:g}" if isinstance(low, float) else f"from {low} to {high}"
    raise SettingsError(f"{label} is not valid: SHOAL_{name.upper()} must be {valid}; {why}")


_INF = float("inf")
_KINDS: dict[str, type] = {"int": int, "float": (float, int), "str": str}  # type: ignore[dict-item]


def _type_name(typ: object) -> str:
    return typ if isinstance(typ, str) else getattr(typ, "__name__", "str")


def _convert(key: str, raw: str, typ: object) -> object:
    kind = {"int": int, "float": float, "str": str}[_type_name(typ)]
    try:
        return kind(raw)
    except ValueError:
        raise SettingsError(f"{key}={raw!r} is not a valid {kind.__name__}") from None


# -- variables read outside a job (the launcher and the builders): read here too ----------------
def cache_root(environ: Mapping[str, str] | None = None) -> str:
    """Where compiled parts are kept: ``$SHOAL_CACHE_DIR``, else ``$XDG_CACHE_HOME/shoal``
    (``~/.cache/shoal``)."""
    env = os.environ if environ is None else environ
    return env.get("SHOAL_CACHE_DIR") or os.path.join(
        env.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "shoal"
    )


def cache_limit(environ: Mapping[str, str] | None = None) -> int:
    """The bound of the stencil kernel cache in bytes: ``$SHOAL_CACHE_MAX_MB`` megabytes,
    else 512; a value that is not a size is an error naming it."""
    env = os.environ if environ is None else environ
    raw = env.get("SHOAL_CACHE_MAX_MB", "")
    try:
        mb = float(raw) if raw else 512.0
    except ValueError:
        mb = -1.0
    if not 0 <= mb < float("inf"):
        raise SettingsError(f"SHOAL_CACHE_MAX_MB={raw!r} is not a size in megabytes (a number >= 0)")
    return int(mb * 2**20)


def mpiexec_choice(environ: Mapping[str, str] | None = None) -> str | None:
    """The launcher ``$SHOAL_MPIEXEC`` names, if any."""
    env = os.environ if environ is None else environ
    return env.get("SHOAL_MPIEXEC") or None

