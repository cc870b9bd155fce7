"""Time loops: how ``Stencil.solve`` turns the user's steps into batches or one backend loop.

``solve(*args)`` records ``iterate()`` step by step and streams ``backend_freq`` steps at
a time; ``solve(steps=N)`` records ``step()`` until the fields it binds repeat (a period
of at most ``_LOOP_PERIOD_MAX`` steps, e.g. a swap of ``u`` and ``v``), checks that the
statements repeat too, and sends one loop of N steps; anything else is sent unrolled.
A convergence check (``until=``) stops the backend where it holds, and the frontend's
field bindings are restored to that step.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from .errors import at_user
from .expr import Condition, Field
from .program import Loop, Step

if TYPE_CHECKING:
    from .program import Check, Recorder

__all__ = ["TimeLoop"]

_LOOP_PERIOD_MAX = 8


class TimeLoop:
    """The ``solve`` half of :class:`~shoal.stencil.frontend.Stencil` (a mixin)."""

    if TYPE_CHECKING:  # provided by Stencil
        backend_freq: int
        solve_mode: str
        _solve: int
        _rec: Recorder
        _steps: list
        _items: list

        def _flush(self, wait: bool = False) -> list: ...
        def _end_step(self, check: Condition | None = None) -> None: ...
        def _check(self, cond: Any) -> Check: ...

    def solve(self, *args: Any, steps: int | None = None, until: Any = None, check_every: int = 1) -> int:
        """Run the time loop; returns the number of steps the backend executed.

        CharmStencil style: ``solve(*args)`` calls ``iterate(*args)`` until it returns
        False, sending ``backend_freq`` steps at a time. shoal style:
        ``solve(steps=N)`` sends ``step()`` as one backend loop of N steps. ``until``
        (a condition, or a function returning one, e.g. ``lambda: norm(self.u - self.v,
        np.inf) < 1e-8``) is checked on the backend every ``check_every`` steps and
        stops the loop there, without a round trip to the frontend.
        """
        if check_every < 1:
            raise at_user(ValueError, f"check_every={check_every} must be at least 1")
        self._flush()  # what came before the solve (boundary conditions, ...) goes first
        self._solve += 1
        try:
            return self._solve_dispatch(args, steps, until, check_every)
        finally:
            self._solve += 1  # later batches are not part of this solve

    def _solve_dispatch(self, args: tuple, steps: int | None, until: Any, check_every: int) -> int:
        has_step = callable(getattr(self, "step", None))
        if steps is not None:
            if not has_step:
                raise at_user(TypeError, f"solve(steps=...) runs {type(self).__name__}.step(); define step(self)")
            return self._solve_loop(int(steps), until, check_every)
        if not callable(getattr(self, "iterate", None)):
            raise at_user(TypeError, f"{type(self).__name__} has no iterate(); define it, or define step() and call solve(steps=N)")
        return self._solve_iterate(args, until, check_every)

    def _cond(self, until: Any) -> Condition | None:
        if until is None:
            return None
        return until() if callable(until) else until

    def _bindings(self) -> dict:
        return {k: v for k, v in vars(self).items() if isinstance(v, Field)}

    def _restore(self, bindings: dict) -> None:
        for k, v in bindings.items():
            setattr(self, k, v)

    def _solve_iterate(self, args: tuple, until: Any, check_every: int) -> int:
        iterate = getattr(self, "iterate")
        return self._stream(lambda: iterate(*args), None, until, check_every)

    def _stream(self, record: Callable[[], Any], limit: int | None, until: Any, check_every: int) -> int:
        """Record steps with ``record()`` (a false value: that was the last) up to ``limit``
        and stream them ``backend_freq`` at a time; stop early when a check converged."""
        self.solve_mode = "steps"
        snapshots = [self._bindings()]
        count = 0
        results: list = []
        while limit is None or count < limit:
            more = record()
            count += 1
            check = self._cond(until) if until is not None and count % check_every == 0 else None
            self._end_step(check)
            snapshots.append(self._bindings())
            if len(self._steps) >= self.backend_freq:
                results += self._flush()
                if any(r.converged >= 0 for r in results):
                    break
            if not more:
                break
        results += self._flush(wait=True)
        return self._finish(results, count, snapshots)

    def _finish(self, results: list, count: int, snapshots: list) -> int:
        for r in results:
            if r.converged >= 0:
                self._restore(snapshots[r.converged])
                self._rec.invalidate()
                return r.converged
        return count

    def _solve_loop(self, steps: int, until: Any, check_every: int) -> int:
        if steps <= 0:
            return 0
        start = self._bindings()
        self._rec.invalidate()  # ops of the body must be right from any starting state
        recorded: list[Step] = []
        snapshots = [start]
        sids: list[tuple] = []
        period = None
        while len(recorded) < min(steps, 2 * _LOOP_PERIOD_MAX):
            getattr(self, "step")()
            k = len(recorded) + 1
            check = self._cond(until) if until is not None else None
            ops = self._rec.take_step_ops()
            c = self._check(check) if check is not None else None
            ops2 = self._rec.take_step_ops()
            recorded.append(Step(ops + ops2, c))
            sids.append(tuple(op for op in ops if op[0] == "s"))
            snapshots.append(self._bindings())
            if k < steps and period is None and _same(snapshots[-1], start):
                period = k
            if period is not None and len(recorded) == 2 * period:
                break
        periodic = (
            period is not None
            and len(recorded) == 2 * period
            and sids[:period] == sids[period:]
            and [s.check and s.check.rid for s in recorded[:period]] == [s.check and s.check.rid for s in recorded[period:]]
        )
        if steps <= len(recorded) or not periodic:
            # short run, or a step whose statements do not repeat: send steps as recorded
            self._restore(start)
            self._rec.invalidate()
            return self._solve_unrolled(steps, until, check_every)
        assert period is not None
        self._items.append(Loop(tuple(recorded[:period]), steps, check_every))
        self.solve_mode = "loop"
        results = self._flush(wait=True)
        self._rec.invalidate()
        executed = steps
        for r in results:
            if r.converged >= 0:
                executed = r.converged
        self._restore(snapshots[executed % period])
        return executed

    def _solve_unrolled(self, steps: int, until: Any, check_every: int) -> int:
        step = getattr(self, "step")
        return self._stream(lambda: step() or True, steps, until, check_every)


def _same(a: dict, b: dict) -> bool:
    """Whether two attribute-to-field maps name the same fields (by identity)."""
    return a.keys() == b.keys() and all(a[k] is b[k] for k in a)
