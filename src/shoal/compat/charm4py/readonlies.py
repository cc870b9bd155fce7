"""``charm4py.readonlies``: a module-wide namespace (Charm4py broadcasts it at start;
on shoal set it at module level, which every PE runs, or with charm.thisProxy.updateGlobals)."""
