"""The shoal program of ``shoal bench checkpoint`` (see :mod:`.cli`).

``write FOLDER GB ELEMENTS TRIALS``: an Array whose elements hold GB of float64 state in all;
each PE first saves its elements' arrays with ``np.save`` (and an fsync, as a checkpoint
makes its files durable) into FOLDER/npsave, and main writes a checkpoint to
FOLDER/ckpt, in alternating order, TRIALS times; medians. ``read FOLDER``: run with ``--restart FOLDER/ckpt``: each PE's
time to rebuild its elements, and ``np.load`` of the same arrays.
"""

from __future__ import annotations

import json
import os
import sys
import time

import numpy as np

import shoal
import shoal.lowlevel


class Block(shoal.Chare):
    def __init__(self, floats: int):
        self.data = np.full(floats, float(self.index[0]))

    def np_save(self, folder: str) -> tuple[int, float]:
        """Save this element's array with np.save plus fsync; (bytes, seconds)."""
        path = os.path.join(folder, f"block-{self.index[0]}.npy")
        start = time.perf_counter()
        with open(path, "wb") as f:
            np.save(f, self.data)
            f.flush()
            os.fsync(f.fileno())
        return self.data.nbytes, time.perf_counter() - start

    def np_load(self, folder: str) -> float:
        start = time.perf_counter()
        a = np.load(os.path.join(folder, f"block-{self.index[0]}.npy"))
        assert a.shape == self.data.shape
        return time.perf_counter() - start

    def check(self) -> bool:
        return bool(self.data[0] == self.index[0] and self.data[-1] == self.index[0])


class PE(shoal.Chare):
    """One per PE: the time this PE took to restore its elements."""

    def restored(self) -> float:
        return shoal.lowlevel.restore_seconds()


def _per_pe(results: list[float], homes: list[int], npes: int) -> float:
    """Elements run their saves one after another on their PE, PEs side by side: the
    time of the busiest PE."""
    per = [0.0] * npes
    for t, pe in zip(results, homes):
        per[pe] += t
    return max(per)


def write(folder: str, gb: float, elements: int, trials: int) -> None:
    floats = int(gb * 1e9 / 8 / elements)
    blocks = shoal.Array(Block, elements, args=(floats,))
    npes = shoal.num_pes()
    homes = [i * npes // elements for i in range(elements)]  # the block placement
    shoal.quiescence().get()
    npsave = os.path.join(folder, "npsave")
    os.makedirs(npsave, exist_ok=True)
    ours, theirs, nbytes, written = [], [], 0, 0
    for trial in range(trials):  # alternate which goes first: the disk remembers the last writer
        for which in (("np", "ckpt") if trial % 2 == 0 else ("ckpt", "np")):
            if which == "np":
                saved = blocks.np_save(npsave, ret=True).get()
                nbytes = sum(b for b, _ in saved)
                theirs.append(_per_pe([t for _, t in saved], homes, npes))
            else:
                start = time.perf_counter()
                written = shoal.checkpoint_sync(os.path.join(folder, "ckpt"), state={"blocks": blocks, "gb": gb})["bytes"]
                ours.append(time.perf_counter() - start)
    seconds, np_seconds = float(np.median(ours)), float(np.median(theirs))
    print(f"write: {nbytes / 1e9:.2f} GB in {elements} elements on {npes} PEs, medians of {trials} alternating "
          f"trials: checkpoint {seconds:.3f} s ({written / seconds / 1e9:.2f} GB/s, quiescence and fsync included; "
          f"trials {', '.join(f'{t:.2f}' for t in ours)}); np.save + fsync {np_seconds:.3f} s "
          f"({nbytes / np_seconds / 1e9:.2f} GB/s; trials {', '.join(f'{t:.2f}' for t in theirs)}); "
          f"bandwidth ratio {np_seconds / seconds:.2f}", flush=True)
    print("JSON " + json.dumps({"phase": "write", "bytes": nbytes, "checkpoint_s": ours, "npsave_s": theirs,
                                "ratio": np_seconds / seconds}), flush=True)


def read(folder: str) -> None:
    saved = shoal.restarted()
    if saved is None:
        print("read: run with --restart FOLDER/ckpt", file=sys.stderr)
        shoal.exit(2)
    blocks = saved["blocks"]
    npes = shoal.num_pes()
    restore = max(shoal.Group(PE).restored(ret=True).get())
    ok = all(blocks.check(ret=True).get())
    elements = len(blocks.check(ret=True).get())
    homes = [i * npes // elements for i in range(elements)]
    loads = blocks.np_load(os.path.join(folder, "npsave"), ret=True).get()
    np_seconds = _per_pe(loads, homes, npes)
    nbytes = saved["gb"] * 1e9
    print(f"read: restart rebuilt {elements} elements on {npes} PEs in {restore:.3f} s "
          f"({nbytes / restore / 1e9:.2f} GB/s, checksums verified, state intact: {ok}); np.load {np_seconds:.3f} s "
          f"({nbytes / np_seconds / 1e9:.2f} GB/s); ratio {np_seconds / restore:.2f}", flush=True)
    print("JSON " + json.dumps({"phase": "read", "restore_s": restore, "npload_s": np_seconds,
                                "ratio": np_seconds / restore, "intact": ok}), flush=True)


def main(args: list) -> None:
    if args[1] == "write":
        write(args[2], float(args[3]), int(args[4]), int(args[5]))
    else:
        read(args[2])


if __name__ == "__main__":
    shoal.start(main)
