"""What ``shoal run`` says after mpiexec returns: which PE failed, and how (no I/O here).

:func:`summarize` takes the PEs' records (:mod:`shoal.jobwatch`), the order in which
their processes ended, and mpiexec's exit code, and returns the job's exit code and the
lines to print, the last one a one-line summary. A PE that reported an error is named
with it; otherwise a PE whose program never ended is named, with its Python stack if it
crashed; otherwise, if mpiexec failed before every PE started, why that may be (mpiexec's
own failures come first: exit code 255, or PEs that failed only on its broken pipes).
"""

from __future__ import annotations

import os

from .jobwatch import PERecord

__all__ = ["summarize", "pe_list", "files_needed"]

_PACKAGE = os.path.dirname(os.path.abspath(__file__))


def pe_list(pes: list[int]) -> str:
    """``PE 3`` or ``PEs 0, 2``."""
    return f"PE{'s' if len(pes) > 1 else ''} {', '.join(map(str, pes))}"


def files_needed(pes: int) -> int:
    """Open files mpiexec needs to start ``pes`` processes (about 4 each: pipes, PMI socket)."""
    return 4 * pes + 64


def summarize(records: dict[int, PERecord], ended: list[list[int]], pes: int, rc: int, *, verdict: str = "",
              guarded: bool = False, command: str = "mpiexec", cores: int = 1,
              file_limit: int = 0) -> tuple[int, list[str]]:
    """The job's exit code and what to print (without the ``shoal run:`` prefix).

    ``ended``: batches of PEs in the order their processes were seen to end; ``verdict``:
    why the launcher ended the job itself (``guarded``: it did, so mpiexec's exit code is
    a signal's, not the program's)."""
    failed = 1 if guarded or not rc else rc
    fatal = sorted((rec.fatal[0], pe, rec.fatal[1]) for pe, rec in records.items() if rec.fatal)
    started = sum(1 for rec in records.values() if rec.pid)
    if started < pes and (rc == 255 or all(_on_pipes(what) for _, _, what in fatal)):
        fatal = []  # mpiexec's own failure (MPICH's 255; Open MPI's any): PEs that did start fail on its pipes
    if fatal:
        _, pe, what = fatal[0]
        also = sorted({p for _, p, _ in fatal[1:]} - {pe})
        more = f" ({pe_list(also)} failed too)" if also else ""
        return failed, [f"the job failed (exit code {failed}): PE {pe}: {what}{more}"]
    if verdict:
        return failed, [f"the job failed (exit code {failed}): {verdict}"]
    vanished = sorted(pe for pe, rec in records.items() if rec.pid and rec.exit_code is None and not rec.fatal)
    if vanished and started == pes:
        # a PE that crashed left its stack (a killed one cannot); else the first seen to end
        first = [pe for pe in vanished if records[pe].fault] or next(
            ([pe for pe in batch if pe in vanished] for batch in ended if set(batch) & set(vanished)), vanished)
        lines = [f"PE {pe} (pid {records[pe].pid}) crashed; its Python stack:\n{_indent(_stack(records[pe].fault))}"
                 for pe in first if records[pe].fault]
        whom = " and ".join(f"PE {pe} (pid {records[pe].pid})" for pe in first)
        rest = [pe for pe in vanished if pe not in first]
        then = f"; {pe_list(rest)} ended with the job" if rest else ""
        # a crash keeps mpiexec's code (its signal's); else the code depends on who ended the
        # others first (mpiexec's SIGKILL: 9; a PE that saw its peer go: 1), so it is 1
        code = failed if records[first[0]].fault else 1
        lines.append(f"the job failed (exit code {code}): {whom} ended before the job finished, "
                     f"{_how(records[first[0]])}{then}")
        return code, lines
    if rc != 0 and started < pes:
        hints = [f"{pes} PEs on {cores} cores"] if pes > cores else []
        if 0 < file_limit < files_needed(pes):
            hints.append(f"mpiexec needs about {files_needed(pes)} open files (4 per PE), the limit is "
                         f"{file_limit} (ulimit -n)")
        hint = f"; {'; '.join(hints)}" if hints else ""
        return rc, [f"mpiexec failed (exit code {rc}) before every PE started ({started} of {pes} started): "
                    f"{command} …{hint}"]
    return rc, []


def _on_pipes(what: str) -> bool:
    """Whether a PE's error is its output breaking, as when mpiexec fails under it: a broken
    pipe, or (Open MPI's forwarding gone) an input/output error writing to it."""
    return "BrokenPipeError" in what or "Broken pipe" in what or "[Errno 5] Input/output error" in what


def _how(rec: PERecord) -> str:
    if rec.fault:
        error = rec.fault.splitlines()[0].removeprefix("Fatal Python error: ")
        frames = _frames(rec.fault)
        return f"with {error}" + (f" in {frames[0]}" if frames else "")
    return "with no error from Python (os._exit(), exit() in C code, or a signal such as SIGKILL)"


def _frames(fault: str) -> list[str]:
    """The program's own frames in a faulthandler stack, innermost first: ``name (file, line n)``."""
    import sysconfig  # here: reports of a crash only

    skip = (sysconfig.get_paths()["stdlib"], _PACKAGE, "<frozen")
    out = []
    for line in fault.splitlines():
        line = line.strip()
        if line.startswith('File "') and " in " in line:
            path, _, rest = line[len('File "'):].partition('", line ')
            number, _, name = rest.partition(" in ")
            if not path.startswith(skip):
                out.append(f"{name} ({path}, line {number})")
    return out


def _stack(fault: str) -> str:
    """A faulthandler report without the launch frames (runpy, shoal's command line) and module list."""
    noise = ("<frozen runpy>", os.path.join(_PACKAGE, "cli.py"), os.path.join(_PACKAGE, "__main__.py"))
    keep = []
    for line in fault.splitlines():
        if line.startswith("Extension modules:"):
            break
        if not any(f'File "{n}' in line for n in noise):
            keep.append(line)
    return "\n".join(keep).rstrip()


def _indent(text: str) -> str:
    return "\n".join("    " + ln for ln in text.splitlines())
