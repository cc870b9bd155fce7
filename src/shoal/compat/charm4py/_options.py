"""Charm++'s own command-line options: taken out of ``sys.argv``, and mapped to shoal
settings where they have a meaning here."""

from __future__ import annotations

import os

__all__ = ["take_launcher_options"]

#: Charm++ options that take a value in the next argument (unless written +opt=value)
_WITH_VALUE = {"+p", "+ppn", "+balancer", "+LBPeriod", "+LBDebug", "+pemap", "+commap", "+setcpuaffinity",
               "++nodelist", "++ppn", "++n", "++p", "+trace-root", "+logsize", "+stacksize", "+vp"}
#: Charm++ balancers -> shoal strategies
_BALANCERS = {"GreedyLB": "greedy", "GreedyRefineLB": "greedy", "RefineLB": "refine", "GreedyCommLB": "comm",
              "RotateLB": "rotate", "RandCentLB": "random", "RandomLB": "random", "MetisLB": "comm",
              "DistributedLB": "refine", "HybridLB": "refine", "TreeLB": "refine"}


def take_launcher_options(argv: list[str]) -> list[str]:
    """``argv`` without Charm++'s ``+opt``/``++opt`` options; ``+balancer X`` sets shoal's
    load-balancing strategy (SHOAL_LB) for this job."""
    out: list[str] = []
    i = 0
    while i < len(argv):
        arg = argv[i]
        if not arg.startswith("+") or arg in ("+", "++"):
            out.append(arg)
            i += 1
            continue
        name, _, value = arg.partition("=")
        if name in _WITH_VALUE and not value:  # `+balancer X`, `+p 4` (but not `+p4`)
            value = argv[i + 1] if i + 1 < len(argv) else ""
            i += 1
        if name == "+balancer" and value:
            strategy = _BALANCERS.get(value)
            if strategy is None:
                raise SystemExit(f"shoal --compat charm4py: +balancer {value}: shoal has no such strategy; "
                                 f"it maps {', '.join(sorted(_BALANCERS))}")
            os.environ.setdefault("SHOAL_LB", strategy)
        i += 1
    return out
