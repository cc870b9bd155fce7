"""Every failure reported truly (issue 35, items 5 and 6): checkpoints where users write
them — an async main after it has awaited, its time loop, checkpoint_point — in one
process and under MPI, still refused from an entry method; a second value for a future
naming where it was made and who sent it; bad ``shoal.Array`` dims, a non-bool ``ret=``
and ``shoal.exit`` codes refused in words; ``shoal.exit("message")`` printed once."""

from __future__ import annotations

import json
import re

import pytest
from support.jobs import run_inproc

import shoal

MPI = pytest.mark.mpi


# -- 5. checkpoints from an async main ----------------------------------------------
class Cell(shoal.Chare):
    def __init__(self) -> None:
        self.x = self.index[0]

    def step(self) -> int:
        self.x += 10
        return self.x

    def value(self) -> int:
        return self.x

    async def checkpoint_async(self, path: str) -> str:
        try:
            await shoal.checkpoint(path)
        except shoal.CheckpointError as exc:
            return str(exc)
        return "written"

    def checkpoint_blocking(self, path: str) -> str:
        try:
            shoal.checkpoint_sync(path)
        except shoal.CheckpointError as exc:
            return str(exc)
        return "written"

    async def point_async(self) -> str:
        try:
            await shoal.checkpoint_point()
        except shoal.CheckpointError as exc:
            return str(exc)
        return "written"


REFUSED = "is for the main program (PE 0, outside entry methods)"


def test_an_async_main_checkpoints_after_awaits_in_one_process(tmp_path):
    path, periodic = tmp_path / "a.ckpt", tmp_path / "periodic.ckpt"
    seen: dict = {}

    async def main(args):
        cells = shoal.Array(Cell, 4)
        seen["first"] = await cells.step(ret=True)  # main has awaited: its steps now run at depth 1
        seen["manifest"] = await shoal.checkpoint(path, state={"cells": cells, "k": -1})
        points = []
        for k in range(3):  # the documented time loop
            await cells.step(ret=True)
            await shoal.checkpoint(path, state={"cells": cells, "k": k})
            points.append(await shoal.checkpoint_point(state={"cells": cells, "k": k}))
        seen["points"] = points
        seen["refused"] = [await cells[0].checkpoint_async(str(tmp_path / "x"), ret=True),
                           await cells[0].checkpoint_blocking(str(tmp_path / "y"), ret=True),
                           await cells[0].point_async(ret=True)]
        seen["values"] = await cells.value(ret=True)

    code = run_inproc(main, 2, checkpoint_every=1e-6, checkpoint_dir=str(periodic))
    assert code == 0
    assert seen["first"] == [10, 11, 12, 13] and seen["manifest"]["elements"] == 4
    assert seen["points"] == [True, True, True]
    assert all(REFUSED in r for r in seen["refused"]), seen["refused"]
    assert not (tmp_path / "x").exists() and not (tmp_path / "y").exists()
    assert json.loads((periodic / "manifest.json").read_text())["elements"] == 4

    restored: dict = {}

    async def again(args):
        state = shoal.restarted()
        restored["k"] = state["k"]
        restored["values"] = await state["cells"].value(ret=True)

    assert run_inproc(again, 3, restart=str(path)) == 0
    assert restored == {"k": 2, "values": seen["values"]}


def test_a_sync_main_checkpoints_and_entry_methods_are_still_refused(tmp_path):
    path = tmp_path / "s.ckpt"
    seen: dict = {}

    def main(args):
        cells = shoal.Array(Cell, 4)
        cells.step(ret=True).get()
        seen["manifest"] = shoal.checkpoint_sync(path, state={"cells": cells})
        seen["point"] = shoal.checkpoint_point_sync(state={"cells": cells})
        seen["refused"] = [cells[0].checkpoint_blocking(str(tmp_path / "y"), ret=True).get(),
                           cells[0].checkpoint_async(str(tmp_path / "x"), ret=True).get()]

    assert run_inproc(main, 2, checkpoint_every=1e-6, checkpoint_dir=str(tmp_path / "p.ckpt")) == 0
    assert seen["manifest"]["elements"] == 4 and seen["point"] is True
    assert all(REFUSED in r for r in seen["refused"]), seen["refused"]


@MPI
def test_an_async_main_checkpoints_after_awaits_under_mpi(mpi_job, tmp_path):
    job = mpi_job(
        """
        import shoal

        class Cell(shoal.Chare):
            def __init__(self):
                self.x = self.index[0]

            def step(self):
                self.x += 10
                return self.x

            async def sneaky(self):
                try:
                    await shoal.checkpoint("bad.ckpt")
                except shoal.CheckpointError as exc:
                    return str(exc)
                return "written"

        async def main(args):
            cells = shoal.Array(Cell, 4)
            print("RESULT first", await cells.step(ret=True))
            manifest = await shoal.checkpoint("a.ckpt", state={"cells": cells})
            print("RESULT wrote", manifest["elements"], manifest["pes"])
            for k in range(3):
                await cells.step(ret=True)
                print("RESULT point", k, await shoal.checkpoint_point(state={"cells": cells, "k": k}))
            print("RESULT element 0:", await cells[0].sneaky(ret=True))
            print("RESULT element 3:", await cells[3].sneaky(ret=True))

        shoal.start(main)
        """,
        n=2, env={"SHOAL_CHECKPOINT_EVERY": "0.000001", "SHOAL_CHECKPOINT_DIR": "periodic.ckpt"}, timeout=60,
    )
    assert job.returncode == 0, job
    assert "RESULT first [10, 11, 12, 13]" in job.stdout and "RESULT wrote 4 2" in job.stdout, job
    for k in range(3):
        assert f"RESULT point {k} True" in job.stdout, job
    assert f"RESULT element 0: shoal.checkpoint() {REFUSED}" in job.stdout, job  # PE 0
    assert f"RESULT element 3: shoal.checkpoint() {REFUSED}" in job.stdout, job  # PE 1
    assert (tmp_path / "a.ckpt" / "manifest.json").exists() and (tmp_path / "periodic.ckpt" / "manifest.json").exists()
    assert not (tmp_path / "bad.ckpt").exists()


# -- 6a. a second value for a future from another PE --------------------------------
TWICE = """
import shoal

class W(shoal.Chare):
    def answer(self, fut):
        fut.send(2)
        {second}

async def main(args):
    w = shoal.Array(W, 2)
    fut = shoal.Future()
    w[1].answer(fut)
    {local}
    print("RESULT", await fut, flush=True)
    await shoal.quiescence()

shoal.start(main)
"""


@MPI
@pytest.mark.parametrize("native", ["1", "0"])  # the compiled receiving path, and Python's
@pytest.mark.parametrize("second, local", [
    ("fut.send(3)", ""),  # PE 1 sends twice
    ("", "fut.send(1)"),  # main resolves the future after sending it: PE 1's value is the second
], ids=["twice from PE 1", "after main's"])
def test_a_second_value_from_another_pe_names_the_sender_and_the_origin(mpi_job, native, second, local):
    job = mpi_job(TWICE.format(second=second, local=local), n=2, env={"SHOAL_NATIVE": native}, timeout=60)
    assert job.returncode != 0, job
    assert re.search(r"PE 1 sent a value to the future created at \S*prog\.py:11 in main on PE 0, which was "
                     r"already resolved; a future resolves once", job.stderr), job


def test_a_second_value_in_one_process_names_the_sender_and_the_origin():
    class Twice(shoal.Chare):
        def answer(self, fut):
            fut.send(2)

    async def main(args):
        w = shoal.Array(Twice, 2)
        fut = shoal.Future()
        w[1].answer(fut)
        fut.send(1)
        await fut
        await shoal.quiescence()

    with pytest.raises(shoal.ShoalError, match=r"PE 1 sent a value to the future created at .*test_reported_truly\.py:\d+ "
                                               r"in main on PE 0, which was already resolved"):
        run_inproc(main, 2)


def test_a_second_value_for_a_future_its_owner_dropped_still_names_the_sender():
    class Twice(shoal.Chare):
        def answer(self, fut):
            fut.send(2)
            fut.send(3)

    async def main(args):
        shoal.Array(Twice, 2)[1].answer(shoal.Future())  # nothing on PE 0 keeps it once resolved
        await shoal.quiescence()

    with pytest.raises(shoal.ShoalError, match=r"PE 1 sent a value to the future #\d+ of PE 0 \(dropped here since, so "
                                               r"where it was made is not known\), which was already resolved"):
        run_inproc(main, 2)


# -- 6b. dims that are not integers --------------------------------------------------
@pytest.mark.parametrize("dims", [2.5, (2, 2.5), "ab", True, -1])
def test_array_dims_that_are_not_positive_integers_are_named(dims):
    failures = []

    def main(args):
        try:
            shoal.Array(Cell, dims)
        except Exception as exc:  # noqa: BLE001
            failures.append(exc)

    run_inproc(main, 1)
    assert len(failures) == 1 and isinstance(failures[0], ValueError), failures
    assert str(failures[0]) == f"shoal.Array dims must be 1 to 8 positive integers, not {dims!r}"


# -- 6c. ret= that is not a bool -----------------------------------------------------
def test_a_ret_that_is_not_a_bool_is_refused_in_one_process():
    results: list = []

    def main(args):
        cells = shoal.Array(Cell, 4)
        calls = {
            "element": lambda r: cells[1].value(ret=r),
            "local element": lambda r: cells[0].value(ret=r),
            "broadcast": lambda r: cells.value(ret=r),
            "section": lambda r: cells.section([(0,), (2,)]).value(ret=r),
        }
        for what, call in calls.items():
            for ret in (5, 0, None, 1.0):
                try:
                    call(ret)
                    results.append((what, ret, "accepted"))
                except TypeError as exc:
                    results.append((what, ret, str(exc)))
        results.append(("plain", cells.value(ret=True).get(), cells.value(ret=False)))

    assert run_inproc(main, 2) == 0
    for what, ret, outcome in results[:-1]:
        assert outcome == f"Cell.value(ret={ret!r}): ret takes True or False, not {type(ret).__name__}", (what, ret)
    assert results[-1] == ("plain", [0, 1, 2, 3], None)


@MPI
def test_a_ret_that_is_not_a_bool_is_refused_by_the_compiled_proxies(mpi_job):
    job = mpi_job(
        """
        import shoal

        class W(shoal.Chare):
            def f(self, x=0):
                return x

        def main(args):
            w = shoal.Array(W, 4)
            calls = [lambda r: w[1].f(ret=r), lambda r: w[1].f(3, ret=r), lambda r: w[1].f(x=3, ret=r),
                     lambda r: w[0].f(x=3, ret=r), lambda r: w.f(ret=r), lambda r: w.f(3, ret=r),
                     lambda r: w.f(x=[3], ret=r)]
            for i, call in enumerate(calls):
                for r in (5, 0, None):
                    try:
                        print("RESULT accepted", i, r, call(r))
                    except TypeError as exc:
                        print("RESULT refused", exc)
            print("RESULT plain", w.f(7, ret=True).get(), w[2].f(x=2, ret=True).get(), w.f(ret=False))

        shoal.start(main)
        """,
        n=2, timeout=60,
    )
    assert job.returncode == 0, job
    assert "RESULT accepted" not in job.stdout, job
    assert job.stdout.count("RESULT refused W.f(ret=5): ret takes True or False, not int") == 7, job
    assert job.stdout.count("RESULT refused W.f(ret=0): ret takes True or False, not int") == 7, job
    assert job.stdout.count("RESULT refused W.f(ret=None): ret takes True or False, not NoneType") == 7, job
    assert "RESULT plain [7, 7, 7, 7] 2 None" in job.stdout, job


# -- 6d/6e. shoal.exit -----------------------------------------------------------------
EXIT = """
import sys
import shoal

class W(shoal.Chare):
    def end(self):
        {call}

def main(args):
    {main}
    shoal.quiescence().get()

shoal.start(main)
"""


@MPI
@pytest.mark.parametrize("where", ["main", "entry method"])
def test_an_exit_message_is_printed_once(mpi_job, where):
    call = 'shoal.exit("boom, said the program")'
    main = call if where == "main" else "shoal.Array(W, 2)[1].end()"
    job = mpi_job(EXIT.format(call=call, main=main), n=2, timeout=60)
    assert job.returncode == 1, job
    assert job.stderr.count("boom, said the program") + job.stdout.count("boom, said the program") == 1, job


@MPI
def test_sys_exit_with_a_message_still_prints_it_once_and_exits_1(mpi_job):
    job = mpi_job(EXIT.format(call="pass", main='sys.exit("boom, said the program")'), n=2, timeout=60)
    assert job.returncode == 1, job
    assert job.stderr.count("boom, said the program") + job.stdout.count("boom, said the program") == 1, job


def test_an_exit_message_in_one_process_is_printed_once_and_exits_1(capfd):
    def main(args):
        shoal.exit("boom, said the program")

    assert run_inproc(main, 2) == 1
    out, err = capfd.readouterr()
    assert (out + err).count("boom, said the program") == 1, (out, err)


@MPI
@pytest.mark.parametrize("code", [300, -1])
def test_an_exit_code_outside_0_to_255_is_refused_in_words(mpi_job, code):
    job = mpi_job(EXIT.format(call="pass", main=f"shoal.exit({code})"), n=2, timeout=60)
    assert job.returncode == 1, job  # not 300 % 256 == 44, nor 255
    assert f"ValueError: shoal.exit({code}): an exit code is 0 to 255" in job.stderr, job


@pytest.mark.parametrize("code", [256, -1, 1 << 40])
def test_an_exit_code_outside_0_to_255_is_refused_in_one_process(code):
    def main(args):
        shoal.exit(code)

    with pytest.raises(ValueError, match=rf"shoal\.exit\({code}\): an exit code is 0 to 255"):
        run_inproc(main, 1)


@pytest.mark.parametrize("code, status", [(0, 0), (255, 255), (None, 0), (True, 1)])
def test_exit_codes_in_range_end_the_job_with_them(code, status):
    def main(args):
        shoal.exit(code)

    assert run_inproc(main, 1) == status
