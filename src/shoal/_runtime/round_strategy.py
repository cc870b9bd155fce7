"""A balancing round's strategy run on its READY reports: the inputs it takes, the moves it makes.

The coordinator's state machine (:mod:`.round_coordinator`) asks for a decision with the
round's READY reports (a DECIDE action); the engine (:mod:`.balancing`) calls
:func:`decide`, which builds the strategy's inputs with NumPy (each element's load and
PE, the PEs' speeds from their wall, busy and idle time, the communication graph, the
elements' sizes), runs the strategy (:mod:`.strategies`), keeps elements that are not
migratable where they are, and measures for the trace and ``--lb-period auto`` what the
round decided. Its result is what :meth:`.round_coordinator.Coordinator.decided` takes.

A READY report is ``(pe, indices, loads, wall, busy, idle, edges, pinned, sizes,
imported)``: the PE, its reported elements, their loads (s), the PE's wall, busy and idle
time since its last report, sampled sends ``(from index, to index, messages, bytes)``,
the positions of elements that stay, their state's bytes (None: not measured), and the
modules the PE imported while reporting.
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False  # typing is for type checkers: a PE's start-up skips its import
if TYPE_CHECKING:
    from typing import Any

    from .collections import CollectionState
    from .round_coordinator import Coordinator
    from .runtime import Runtime

from ..errors import ShoalError
from .lb_period import AUTO, interval, next_floor

__all__ = ["decide"]


def decide(rt: "Runtime", cs: "CollectionState", coord: "Coordinator", reports: list) -> dict | None:
    """Run the job's strategy on the READY ``reports`` of an at_sync round of ``cs``: the
    keyword arguments of ``coord.decided`` (``moves`` and what the round's record and trace
    keep), or None if the strategy failed (the job fails, named)."""
    import numpy as np

    from .strategies import REASONED, CommGraph, background_speeds, check_placement
    from .strategy_registry import get_strategy

    modules = len(sys.modules)
    name = rt.settings.lb
    try:
        strategy = get_strategy(name)
    except ShoalError as exc:
        rt.fail(exc, f"balancing the Array of {cs.info.cls.__qualname__}")
        return None
    indices = [index for r in reports for index in r[1]]
    placement = np.concatenate([np.full(len(r[1]), r[0], np.int64) for r in reports])
    loads = np.concatenate([r[2] for r in reports])
    wall, busy, idle = np.ones(rt.npes), np.ones(rt.npes), np.zeros(rt.npes)
    seen: set[int] = set()
    for r in reports:  # a PE whose elements moved while it reported may send several
        if r[0] not in seen:
            seen.add(r[0])
            wall[r[0]], busy[r[0]], idle[r[0]] = 0.0, 0.0, 0.0
        wall[r[0]] += r[3]
        busy[r[0]] += r[4]
        idle[r[0]] += r[5]
    # background load (other processes on a PE's core, the main program, the runtime's
    # own work) as a PE's speed: busy / (wall - idle) since the last round. Not in the
    # first round (start-up is no measure) nor where PEs share one process and take turns
    measured = coord.number > 0 and len(rt.engine.runtimes) == 1
    speeds = background_speeds(wall, busy, idle) if measured else np.ones(rt.npes)
    position = {index: i for i, index in enumerate(indices)}
    edges = [(position[s], position[d], m, b) for r in reports for s, d, m, b in r[6] if d in position]
    comm = CommGraph(*(np.array([e[k] for e in edges], np.int64) for k in range(4))) if edges else CommGraph.empty()
    options = {}
    if reports and all(r[8] is not None for r in reports):  # the PEs measured them: the strategy takes sizes
        options["sizes"] = np.concatenate([r[8] for r in reports])
    reasoned = REASONED.get(strategy) if rt.tracer is not None else None
    try:
        if reasoned is not None:
            placed, said = reasoned(loads, comm, placement, rt.npes, speeds, **options)
        else:
            placed, said = strategy(loads, comm, placement, rt.npes, speeds, **options), None
        new = check_placement(placed, len(indices), rt.npes, name)
    except Exception as exc:  # noqa: BLE001 - a user's strategy: its error ends the job, named
        rt.fail(exc, f"load-balancing strategy {name!r} on the Array of {cs.info.cls.__qualname__}")
        return None
    first = np.cumsum([0] + [len(r[1]) for r in reports[:-1]])
    pinned = [int(at) + i for r, at in zip(reports, first) for i in r[7]]
    new[pinned] = placement[pinned]  # elements that are not migratable stay
    moved = np.nonzero(new != placement)[0]
    out: dict[str, Any] = {"moves": [(indices[i], int(placement[i]), int(new[i])) for i in moved]}
    if rt.tracer is not None:  # what the strategy decided and why, for the trace
        out["reason"] = _reason(name, loads, placement, new, speeds, said)
    if "sizes" in options:
        out["moved_bytes"] = float(options["sizes"][moved].sum())
    if rt.settings.lb_period == AUTO:  # the interval that ends here, and what the new placement leaves
        # idle time: not where PEs share one process and take turns (each sees the process's)
        waited = idle if len(rt.engine.runtimes) == 1 else None
        out["measured"] = interval(loads, placement, speeds, coord.period, coord.residual, waited, coord.floor)
        out["floor"] = next_floor(out["measured"]) if waited is not None else None
        out["residual"] = interval(loads, new, speeds, coord.period, 0.0).lost / max(coord.period, 1)
    out["imported"] = sum(r[9] for r in reports) + len(sys.modules) - modules
    return out


def _reason(name: str, loads: Any, placement: Any, new: Any, speeds: Any, said: Any) -> dict:
    """A round's reason for the trace: the strategy's own (``said``: auto's) with the moves
    and the predicted imbalance of ``new`` (pinned elements kept), else measured here."""
    from .strategies import TOLERANCE
    from .strategy_reasons import judge

    if said is None:
        return judge(name, loads, placement, new, speeds, TOLERANCE).as_args()
    return judge(name, loads, placement, new, speeds, said.threshold - 1.0, said.plan, said.why, said.saved, said.cost,
                 said.weighed).as_args()
