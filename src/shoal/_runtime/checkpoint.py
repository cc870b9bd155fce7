"""Checkpoints: every collection, every element and main's state in a directory; restart from it.

Layout of a checkpoint directory::

    manifest.json   shoal version, program, PE count, time, the collections, and the
                    size and checksum of every other file
    index.pkl       one record per element: collection, index, file, offset, the
                    length of each segment, the element's checksum
    main.pkl        what main passed as ``state=``
    pe-00000.dat    PE k's elements, each the segments of migration.py's packing: the
                    pickle stream, then its NumPy buffers written straight from memory

Writing: after global quiescence (no message in flight, nothing running: a checkpoint
never cuts a reduction or a broadcast in half), every PE writes its file into a
temporary folder and fsyncs it; PE 0 writes the rest, fsyncs, and renames the folder
into place last, keeping the previous checkpoint until then. Restart (``SHOAL_RESTART``):
before main runs, every PE reads the manifest and the index, verifies what it reads, and
rebuilds the elements whose home is it on the new PE count, under the same collection
ids, so proxies in main's state point at them. ``SHOAL_RESTART=auto`` restarts from the
newest complete checkpoint in the checkpoint directory, or starts fresh if there is none,
so a batch script can run the same command until the job succeeds.
"""

from __future__ import annotations

import glob
import json
import mmap
import os
import pickle
import re
import shlex
import shutil
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Coroutine

import xxhash

from ..errors import CheckpointError
from . import channels, tree
from .collections import CollectionInfo, CollectionState
from .context import current
from .futures import Future
from .message import encode_shared
from .migration import pack, rebuild
from .proxy import proxy_classes

if TYPE_CHECKING:
    from ..settings import Settings
    from .runtime import Runtime

__all__ = ["checkpoint", "checkpoint_sync", "checkpoint_point", "checkpoint_point_sync", "restarted", "write_pe",
           "commit", "restore", "read_main_state", "verify", "latest", "resume_command", "after_death", "FORMAT", "AUTO",
           "RESUME_EXIT"]

FORMAT = "shoal.checkpoint/1"
#: ``--restart auto``: the newest complete checkpoint in the checkpoint directory, if any
AUTO = "auto"
#: The exit code of a job that lost a PE and can resume from a checkpoint (``EX_TEMPFAIL``):
#: under a launcher other than ``shoal run``, the PE that saw the death exits with it.
RESUME_EXIT = 75
_CHUNK = 1 << 24  # files are checked in 16 MiB reads


# -- the API ------------------------------------------------------------------------
def checkpoint(path: str | os.PathLike[str], state: Any = None) -> Coroutine[Any, Any, dict]:
    """``await shoal.checkpoint(path, state=obj)`` in an async main: once no message is in
    flight, write every collection, every element and ``obj`` to directory ``path``
    (atomically: a previous checkpoint there stays until the new one is complete).
    Returns the manifest (what was written)."""
    rt = _main_runtime("shoal.checkpoint()")
    final = os.fspath(path)

    async def run() -> dict:
        await rt.quiescence()
        folder = _new_folder(final)
        parts: Future = Future()
        rt.system.collect(write_pe, (folder,), parts)
        return commit(rt, folder, final, await parts, state)

    return run()


def checkpoint_sync(path: str | os.PathLike[str], state: Any = None) -> dict:
    """:func:`checkpoint` for a synchronous main: returns when the checkpoint is written."""
    rt = _main_runtime("shoal.checkpoint_sync()")
    final = os.fspath(path)
    rt.quiescence().get()
    folder = _new_folder(final)
    parts: Future = Future()
    rt.system.collect(write_pe, (folder,), parts)
    return commit(rt, folder, final, parts.get(), state)


def checkpoint_point(state: Any = None) -> Coroutine[Any, Any, bool]:
    """``await shoal.checkpoint_point(state=obj)`` at a safe point of an async main's time
    loop: writes a checkpoint to ``SHOAL_CHECKPOINT_DIR`` when ``SHOAL_CHECKPOINT_EVERY``
    seconds passed since the last one (``shoal run --checkpoint-every``); True if it did."""
    rt = _main_runtime("shoal.checkpoint_point()")

    async def run() -> bool:
        if not _due(rt):
            return False
        await checkpoint(rt.settings.checkpoint_dir, state)
        rt.last_checkpoint = time.monotonic()
        return True

    return run()


def checkpoint_point_sync(state: Any = None) -> bool:
    """:func:`checkpoint_point` for a synchronous main."""
    rt = _main_runtime("shoal.checkpoint_point_sync()")
    if not _due(rt):
        return False
    checkpoint_sync(rt.settings.checkpoint_dir, state)
    rt.last_checkpoint = time.monotonic()
    return True


def _due(rt: "Runtime") -> bool:
    every = rt.settings.checkpoint_every
    return every > 0 and time.monotonic() - rt.last_checkpoint >= every


def restarted() -> Any:
    """In main: the ``state=`` of the checkpoint this run restarted from (``shoal run
    --restart PATH``), its proxies pointing at the restored collections; None otherwise."""
    return current("shoal.restarted()").restart_state


def _main_runtime(what: str) -> "Runtime":
    rt = current(what)
    if rt.pe != 0 or not _in_main(rt):
        raise CheckpointError(f"{what} is for the main program (PE 0, outside entry methods)")
    return rt


def _in_main(rt: "Runtime") -> bool:
    """Whether the main program runs now, not an entry method: a synchronous main runs
    at depth 0; an async main's every step runs at depth 1 (Task.step counts it as a
    coroutine, so that blocking calls are refused in it), with its coroutine running and
    no entry method nested in it. An entry method's coroutine runs while main's waits."""
    depth = rt.counts.depth
    if depth == 0:
        return True
    return depth == 1 and bool(getattr(rt.main_coro, "cr_running", False))


def _new_folder(final: str) -> str:
    parent = os.path.dirname(os.path.abspath(final))
    if not os.path.isdir(parent):
        raise CheckpointError(f"checkpoint {final!r}: its folder {parent} does not exist")
    folder = f"{os.path.abspath(final)}.tmp-{os.getpid()}-{int(time.time() * 1e6)}"
    try:
        os.mkdir(folder)
    except OSError as exc:
        raise CheckpointError(f"checkpoint {final!r}: cannot create {folder}: {exc.strerror}") from None
    return folder


class _Sum:
    """A running checksum (XXH3-64: about 28 GB/s here, four times CRC-32's speed, so the
    check costs little next to the disk)."""

    __slots__ = ("h",)

    def __init__(self) -> None:
        self.h = xxhash.xxh3_64()

    def add(self, data: Any) -> "_Sum":
        self.h.update(memoryview(data).cast("B"))
        return self

    @property
    def value(self) -> int:
        return self.h.intdigest()


def _sum(data: Any) -> int:
    return _Sum().add(data).value


def _user_collections(rt: "Runtime") -> list[CollectionState]:
    skip = {0}
    if rt.pool_workers is not None:
        skip.add(rt.pool_workers._info.id)
    return [cs for coll, cs in sorted(rt.colls.items()) if coll not in skip and cs.info.kind != "group"]


def write_pe(rt: "Runtime", folder: str) -> dict:
    """Write this PE's elements to ``folder``; their index records and the file's facts."""
    path = os.path.join(folder, f"pe-{rt.pe:05d}.dat")
    try:
        return _write_pe(rt, path)
    except OSError as exc:
        raise CheckpointError(f"PE {rt.pe}: cannot write {path}: {exc.strerror or exc} "
                              "(the previous checkpoint, if any, is untouched)") from None


def _write_pe(rt: "Runtime", path: str) -> dict:
    name = os.path.basename(path)
    started = time.perf_counter()
    records: list = []
    offset = 0
    file_sum = _Sum()
    with open(path, "wb") as f:
        for cs in _user_collections(rt):
            for index, el in cs.elements.items():
                rt.migration.check_idle(el, "be checkpointed")
                channels._moving = True
                try:
                    segments = encode_shared((pack(el), el._shoal_moves))  # device arrays as host bytes
                except Exception as exc:
                    raise CheckpointError(
                        f"PE {rt.pe}: element {index} of {cs.info.cls.__qualname__} cannot be checkpointed: its "
                        f"state cannot be pickled ({type(exc).__name__}: {exc})"
                    ) from None
                finally:
                    channels._moving = False
                lengths, element_sum = [], _Sum()
                for seg in segments:
                    view = memoryview(seg).cast("B")
                    f.write(view)
                    element_sum.add(view)
                    file_sum.add(view)
                    lengths.append(view.nbytes)
                records.append((cs.info.id, index, name, offset, lengths, element_sum.value))
                offset += sum(lengths)
        f.flush()
        os.fsync(f.fileno())
    if rt.tracer is not None:  # the timeline's ★ (shoal trace report)
        rt.tracer.mark("checkpoint", started, elements=len(records), bytes=offset,
                       ms=round(1e3 * (time.perf_counter() - started), 3))
    return {"pe": rt.pe, "file": name, "bytes": offset, "checksum": file_sum.value, "records": records}


def commit(rt: "Runtime", folder: str, final: str, parts: list, state: Any) -> dict:
    """PE 0: write main's state, the index and the manifest, then put ``folder`` in place."""
    try:
        return _commit(rt, folder, final, parts, state)
    except OSError as exc:
        raise CheckpointError(f"cannot finish checkpoint {final!r} in {folder}: {exc.strerror or exc} "
                              "(the previous checkpoint, if any, is untouched)") from None


def _commit(rt: "Runtime", folder: str, final: str, parts: list, state: Any) -> dict:
    records = [r for part in sorted(parts, key=lambda p: p["pe"]) for r in part["records"]]
    files = {}
    for part in parts:
        files[part["file"]] = {"bytes": part["bytes"], "checksum": part["checksum"]}
    for name, data in (("main.pkl", _dumps(state)), ("index.pkl", pickle.dumps(records, 5))):
        _write(os.path.join(folder, name), data)
        files[name] = {"bytes": len(data), "checksum": _sum(data)}
    colls = [_describe(cs.info, sum(1 for r in records if r[0] == cs.info.id)) for cs in _user_collections(rt)]
    periodic = os.path.abspath(final) == os.path.abspath(rt.settings.checkpoint_dir)
    manifest = {
        "format": FORMAT, "shoal": _version(), "program": os.path.abspath(sys.argv[0]) if sys.argv else "",
        "argv": sys.argv[1:], "every": rt.settings.checkpoint_every if periodic else 0,  # for the resume command
        "compat": os.environ.get("SHOAL_COMPAT", ""),
        "checksum": "xxh3_64", "pes": rt.npes, "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "elements": len(records),
        "bytes": sum(p["bytes"] for p in parts), "collections": colls, "files": files,
    }
    _write(os.path.join(folder, "manifest.json"), json.dumps(manifest, indent=1).encode())
    _fsync_dir(folder)
    old = None
    if os.path.exists(final):
        old = f"{final}.old-{os.getpid()}-{time.time_ns()}"
        os.rename(final, old)
    os.rename(folder, final)
    _fsync_dir(os.path.dirname(os.path.abspath(final)))
    if old is not None:  # out of the way already: delete it while the program goes on
        threading.Thread(target=shutil.rmtree, args=(old,), kwargs={"ignore_errors": True}, name="shoal-rmtree").start()
    return manifest


def _dumps(state: Any) -> bytes:
    """Main's state as one pickle (cloudpickle for what plain pickle cannot name)."""
    try:
        return pickle.dumps(state, 5)
    except (pickle.PicklingError, AttributeError, TypeError) as first:
        try:
            import cloudpickle

            return cloudpickle.dumps(state, 5)
        except Exception:
            raise CheckpointError(f"shoal.checkpoint(state=...): the state cannot be pickled ({first})") from None


def _describe(info: CollectionInfo, elements: int) -> dict:
    return {"id": info.id, "class": f"{info.cls.__module__}.{info.cls.__qualname__}", "kind": info.kind,
            "shape": list(info.shape) if info.shape is not None else None, "ndims": info.ndims,
            "root": info.root, "elements": elements,
            "info": pickle.dumps((info.cls, info.placement), 5).hex()}


def _version() -> str:
    from ..version import __version__

    return __version__


def _write(path: str, data: bytes) -> None:
    with open(path, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def _fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _file_sum(path: str) -> int:
    total = _Sum()
    with open(path, "rb") as f:
        while True:
            block = f.read(_CHUNK)
            if not block:
                return total.value
            total.add(block)


# -- reading -------------------------------------------------------------------------
def read_manifest(path: str) -> dict:
    """The manifest of checkpoint ``path``, checked: a clear error names what is wrong."""
    where = os.path.join(path, "manifest.json")
    if not os.path.isdir(path):
        raise CheckpointError(f"checkpoint {path!r} does not exist or is not a directory")
    try:
        with open(where, "rb") as f:
            manifest = json.loads(f.read())
    except FileNotFoundError:
        raise CheckpointError(f"{where}: missing (a checkpoint that was never finished?)") from None
    except (OSError, ValueError) as exc:
        raise CheckpointError(f"{where}: unreadable or truncated ({exc})") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise CheckpointError(f"{where}: not a shoal checkpoint manifest (format {FORMAT})")
    if manifest.get("shoal") != _version():
        raise CheckpointError(f"{where}: written by shoal {manifest.get('shoal')}, this is shoal {_version()}; "
                              "restart with the version that wrote it")
    return manifest


def _read_checked(path: str, name: str, manifest: dict) -> bytes:
    where = os.path.join(path, name)
    facts = manifest["files"].get(name)
    try:
        data = Path(where).read_bytes()
    except FileNotFoundError:
        raise CheckpointError(f"{where}: missing") from None
    if facts is None or len(data) != facts["bytes"]:
        raise CheckpointError(f"{where}: truncated or the wrong size ({len(data)} bytes, the manifest says "
                              f"{facts and facts['bytes']})")
    if _sum(data) != facts["checksum"]:
        raise CheckpointError(f"{where}: checksum mismatch (the file changed after it was written)")
    return data


def latest(folder: str) -> str | None:
    """The newest complete checkpoint written to ``folder``: the folder itself or, after a
    crash between the two renames that replace it, the finished ``folder.tmp-*`` beside it
    (its manifest is written last); None if there is none."""
    if os.path.isfile(os.path.join(folder, "manifest.json")):
        return folder
    if os.path.isdir(folder) and os.listdir(folder):
        raise CheckpointError(f"{folder}: holds files but no manifest.json (not a shoal checkpoint, or a damaged one)")
    done = glob.glob(os.path.join(glob.escape(folder) + ".tmp-*", "manifest.json"))
    return os.path.dirname(max(done, key=os.path.getmtime)) if done else None


def _resolve(path: str, settings: "Settings") -> str | None:
    """The checkpoint a restart from ``path`` reads; for ``auto`` the newest in the
    checkpoint directory (None: there is none, so the run starts fresh)."""
    return latest(os.path.abspath(settings.checkpoint_dir)) if path == AUTO else path


def restore(rt: "Runtime", path: str) -> None:
    """Rebuild the checkpoint's collections on this PE: its elements are those whose home
    on the new PE count is this PE. ``auto`` (:func:`latest`) says on PE 0 what it chose."""
    found = _resolve(path, rt.settings)
    if path == AUTO and rt.pe == 0:
        what = f"restarting from {found}" if found else "no checkpoint there yet, starting fresh"
        print(f"shoal: --restart auto with checkpoint directory {os.path.abspath(rt.settings.checkpoint_dir)}: "
              f"{what}", file=sys.stderr, flush=True)
    if found is None:
        return
    path = found
    manifest = read_manifest(path)
    program, here = os.path.basename(manifest.get("program", "")), os.path.basename(sys.argv[0]) if sys.argv else ""
    if program and here and program != here:
        raise CheckpointError(f"{os.path.join(path, 'manifest.json')}: written by program {program}, "
                              f"this is {here}; restart the program that wrote it")
    records = pickle.loads(_read_checked(path, "index.pkl", manifest))
    by_coll: dict[int, list] = {}
    for r in records:
        by_coll.setdefault(r[0], []).append(r)
    maps: dict[str, memoryview] = {}
    for c in manifest["collections"]:
        try:
            cls, placement = pickle.loads(bytes.fromhex(c["info"]))
        except Exception as exc:
            raise CheckpointError(f"{path}: collection of {c['class']} cannot be restored: the class or its "
                                  f"placement is not importable here ({type(exc).__name__}: {exc})") from None
        info = CollectionInfo(c["id"], cls, c["kind"], tuple(c["shape"]) if c["shape"] else None, c["ndims"],
                              placement, c["root"] % rt.npes)
        rt.infos[info.id] = info
        cs = rt.colls[info.id] = CollectionState(info, proxy_classes(info.cls)[1](info))
        indices = [tuple(r[1]) for r in by_coll.get(info.id, ())]
        homes = sorted({info.home(i, rt.npes) for i in indices})
        cs.hosts = homes if info.kind == "sparse" else info.hosts(rt.npes)
        cs.span = tree.over(cs.hosts, rt.pe, rt.fanout, rt.nodes)
        cs.size = len(indices)
        cs.done = True
        mine = [r for r in by_coll.get(info.id, ()) if info.home(tuple(r[1]), rt.npes) == rt.pe]
        cs.count = len(mine)
        for r in mine:
            _restore_element(rt, cs, path, r, maps)
        if (info.id >> 32) == rt.pe:
            rt._next_id = max(rt._next_id, info.id & 0xFFFFFFFF)


def _restore_element(rt: "Runtime", cs: CollectionState, path: str, record: tuple, maps: dict) -> None:
    coll, index, name, offset, lengths, expected = record
    index = tuple(index)
    where = os.path.join(path, name)
    view = maps.get(name)
    if view is None:
        view = maps[name] = _map(where, cs, index)
    end = offset + sum(lengths)
    if end > len(view):
        raise CheckpointError(f"{where}: truncated (element {index} of {cs.info.cls.__qualname__} ends past "
                              "the end of the file)")
    segments, check, at = [], _Sum(), offset
    for n in lengths:
        segment = view[at:at + n]  # the file's pages, copy-on-write: no copy unless written
        check.add(segment)
        segments.append(segment)
        at += n
    if check.value != expected:
        raise CheckpointError(f"{where}: checksum mismatch in element {index} of {cs.info.cls.__qualname__}")
    try:
        el = rebuild(rt, cs, index, [bytes(segments[0]), *segments[1:]])
    except CheckpointError:
        raise
    except Exception as exc:
        raise CheckpointError(f"{where}: element {index} of {cs.info.cls.__qualname__} cannot be restored with "
                              f"the class as it is now ({type(exc).__name__}: {exc})") from None
    cs.elements[index] = el


def _map(where: str, cs: CollectionState, index: tuple) -> memoryview:
    """File ``where`` mapped copy-on-write: arrays restored from it use its pages, read
    when touched, and stay writable (a write copies that page only)."""
    try:
        with open(where, "rb") as f:
            if os.fstat(f.fileno()).st_size == 0:
                return memoryview(b"")
            return memoryview(mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_COPY))
    except FileNotFoundError:
        raise CheckpointError(f"{where}: missing (it holds element {index} of {cs.info.cls.__qualname__})") from None


def read_main_state(path: str) -> Any:
    """What main passed as ``state=`` (after the collections are rebuilt here); None when
    ``auto`` found no checkpoint."""
    found = _resolve(path, current("shoal.restarted()").settings)
    return None if found is None else pickle.loads(_read_checked(found, "main.pkl", read_manifest(found)))


def resume_command(path: str, manifest: dict, pes: int | None = None) -> str:
    """The command line that resumes from checkpoint ``path`` (with ``manifest``) under
    ``srun`` in a Slurm job, else ``mpiexec``, on ``pes`` PEs (default: as many as wrote it),
    checkpointing as often as the run that wrote it did."""
    every = manifest.get("every", 0)
    home = re.sub(r"\.tmp-\d+-\d+$", "", path)  # where periodic checkpoints go on
    periodic = ["--checkpoint-every", f"{every:g}", "--checkpoint-dir", home] if every else []
    compat = ["--compat", manifest["compat"]] if manifest.get("compat") else []
    return shlex.join(["srun" if "SLURM_JOB_ID" in os.environ else "mpiexec", "-n", str(pes or manifest["pes"]),
                       sys.executable, "-m", "shoal", *compat, *periodic, "--restart", path, manifest["program"],
                       *manifest.get("argv", [])])


def after_death(settings: "Settings", pes: int) -> tuple[int, str]:
    """What a PE that saw another PE's process die says, and the job's exit code: with
    checkpoints configured (``--checkpoint-every`` or ``--checkpoint-dir``) and one written,
    :data:`RESUME_EXIT` and the command that resumes; otherwise 1 and why not."""
    folder = os.path.abspath(settings.checkpoint_dir)
    if settings.checkpoint_every <= 0 and "SHOAL_CHECKPOINT_DIR" not in os.environ:
        return 1, "no checkpoints are configured (--checkpoint-every, --checkpoint-dir), so there is nothing to resume"
    try:
        found = latest(folder)
        if found is None:
            return 1, f"no checkpoint was written to {folder} yet, so there is nothing to resume"
        manifest = read_manifest(found)
    except CheckpointError as exc:
        return 1, f"there is no usable checkpoint to resume from: {exc}"
    return RESUME_EXIT, (f"last good checkpoint {found} (written {manifest['time']}); exit code {RESUME_EXIT}; "
                         f"resume with: {resume_command(found, manifest, pes)}")


def verify(path: str) -> dict:
    """Check every file of checkpoint ``path`` against the manifest; the manifest."""
    manifest = read_manifest(path)
    for name in manifest["files"]:
        where = os.path.join(path, name)
        if not os.path.exists(where):
            raise CheckpointError(f"{where}: missing")
        size = os.path.getsize(where)
        if size != manifest["files"][name]["bytes"]:
            raise CheckpointError(f"{where}: truncated or the wrong size ({size} bytes, the manifest says "
                                  f"{manifest['files'][name]['bytes']})")
        if _file_sum(where) != manifest["files"][name]["checksum"]:
            raise CheckpointError(f"{where}: checksum mismatch (the file changed after it was written)")
    return manifest

