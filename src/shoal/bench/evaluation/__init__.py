"""The evaluation method: experiment files, resumable CSV results and ``shoal bench report``.

* :mod:`.spec` reads an experiment's TOML file and expands its grid into runs (pure);
* :mod:`.results` reads and appends the CSV results file (one row per trial);
* :mod:`.runner` runs the planned trials, resuming a results file, with progress;
* :mod:`.analysis` turns result rows into tables (medians, means, CIs, p-values,
  scaling) with :mod:`shoal.bench.stats`; :mod:`.figures` and :mod:`.html` draw and
  write them; :mod:`.report` is ``shoal bench report``.

docs/benchmarks.md ("Experiment files and reports") describes the file format.
"""
