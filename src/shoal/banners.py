"""The MPI launchers' banners, dropped from a job's stderr on its way through ``shoal run``.

When a PE fails or vanishes, MPICH's Hydra prints a "BAD TERMINATION OF ONE OF YOUR
APPLICATION PROCESSES" box and Open MPI prints "MPI_ABORT was invoked" and "prterun has
exited due to process rank" boxes: twenty lines of noise around shoal's own report,
which names the PE and the real error. The launcher reads mpiexec's stderr through a
:class:`Filter`, which passes everything else through unchanged and as it comes (a line
not yet ended too, unless it may begin a banner). ``SHOAL_DEBUG=1`` keeps the banners.
"""

from __future__ import annotations

import os

__all__ = ["Filter"]

#: the lines that follow Hydra's box of "=" rules
_HYDRA_TAIL = (b"YOUR APPLICATION TERMINATED WITH THE EXIT STRING:", b"This typically refers to a problem with your",
               b"Please see the FAQ page for debugging suggestions")
#: the first line of the Open MPI boxes (between "-" rules) that are noise once shoal has
#: reported; others, such as "not enough slots", are the launcher's own errors and stay
_OMPI_NOISE = (b"MPI_ABORT was invoked on rank", b"prterun has exited due to process rank",
               b"mpirun has exited due to process rank", b"mpiexec has exited due to process rank")
_OPENERS = (*_HYDRA_TAIL, *_OMPI_NOISE)


def _rule(line: bytes, char: bytes) -> bool:
    return len(line) >= 40 and not line.strip(char)


def _marked(text: bytes) -> bool:
    """Whether ``text`` holds anything a banner begins with (a rule, an opening line)."""
    return b"=" * 40 in text or b"-" * 40 in text or any(o in text for o in _OPENERS)


def _may_begin_banner(partial: bytes) -> bool:
    """Whether a line not yet ended may turn out to be part of a banner (held back); NUL
    bytes alone too: Open MPI's launcher ends its stderr with one, dropped at the end."""
    return (partial[:1] in (b"=", b"-") or not partial.strip(b"\0")
            or any(o.startswith(partial) or partial.startswith(o) for o in _OPENERS))


class Filter:
    """Feed it mpiexec's stderr as it comes (:meth:`feed`), then :meth:`close`; what is not
    a banner is written to ``fd`` (2: this process's stderr)."""

    __slots__ = ("fd", "partial", "blank", "mode", "held", "mid")

    def __init__(self, fd: int = 2):
        self.fd = fd
        self.partial = b""  # the last line, not ended yet
        self.blank = False  # a blank line held back: Hydra's box comes after one
        self.mode = ""  # "": passing through; "hydra", "hydra-tail", "ompi": in a box; "rule": a "-" rule held
        self.held = b""  # that rule, until the next line says whether its box is noise
        self.mid = False  # part of a line went through already: the rest of it follows it

    def feed(self, data: bytes) -> None:
        if self.mid:  # the rest of a line whose start went through
            head, end, data = data.partition(b"\n")
            self._write(head + end)
            if not end:
                return
            self.mid = False
        at_start, text = not self.partial, self.partial + data
        if self.mode == "" and not self.blank and not _marked(text):  # the common case: no banner near
            cut = text.rfind(b"\n") + 1
            out, self.partial = text[:cut], text[cut:]
            if out.endswith(b"\n\n") or (out == b"\n" and at_start):  # a blank line last: Hydra's box may follow
                out, self.blank = out[:-1], True
        else:
            *lines, self.partial = text.split(b"\n")
            out = b"".join(kept + b"\n" for line in lines if (kept := self._line(line)) is not None)
        if self.partial and self.mode == "" and not _may_begin_banner(self.partial):
            out += (b"\n" if self.blank else b"") + self.partial  # a prompt, a progress bar: on its way now
            self.blank, self.partial, self.mid = False, b"", True
        self._write(out)

    def close(self) -> None:
        """The end of the stream: what is held back and not a banner."""
        out = self.held + b"\n" if self.mode == "rule" else b""
        if self.blank:
            out += b"\n"
        if self.mode in ("", "rule") and self.partial.strip(b"\0"):
            out += self.partial
        self.partial, self.blank, self.mode, self.held, self.mid = b"", False, "", b"", False
        self._write(out)

    def _line(self, line: bytes) -> bytes | None:
        """What to write for one whole line (without its end): itself, after what was held; None: nothing."""
        mode = self.mode
        if mode == "hydra":
            if _rule(line, b"="):
                self.mode = "hydra-tail"
            return None
        if mode == "ompi":
            if _rule(line, b"-"):
                self.mode = ""
            return None
        if mode == "hydra-tail":
            self.mode = ""
            if line.startswith(_HYDRA_TAIL):
                self.mode = "hydra-tail"
                return None
        elif mode == "rule":
            self.mode = ""
            if line.startswith(_OMPI_NOISE):
                self.mode = "ompi"
                return None
            held, self.held = self.held, b""
            rest = self._line(line)
            return self._after_blank(held if rest is None else held + b"\n" + rest)
        if _rule(line, b"="):
            self.blank, self.mode = False, "hydra"
            return None
        if _rule(line, b"-"):
            self.mode, self.held = "rule", line
            return None
        if not line:
            was, self.blank = self.blank, True
            return b"" if was else None
        return self._after_blank(line)

    def _after_blank(self, text: bytes) -> bytes:
        """``text``, after the blank line held back, if any."""
        if self.blank:
            self.blank = False
            return b"\n" + text
        return text

    def _write(self, data: bytes) -> None:
        while data:
            try:
                data = data[os.write(self.fd, data):]
            except InterruptedError:
                continue
            except OSError:
                return  # stderr is gone (the terminal closed): nobody to tell
