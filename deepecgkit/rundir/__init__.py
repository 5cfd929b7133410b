"""The run directory: the format that hands numbers from training to analysis, and its I/O.

One package owns the contract (docs/run-directory.md):

* :mod:`~deepecgkit.rundir.format`: file names, column names, keys and the
  schema of each file; :mod:`~deepecgkit.rundir.metrics`: the metric registry;
* :mod:`~deepecgkit.rundir.write`: what training, evaluation and the
  synthetic generators call to write a run directory;
* :mod:`~deepecgkit.rundir.read`: what the analysis, the statistical report
  and the platform call to read one (runs, discovery, predictions, checkpoints);
* :mod:`~deepecgkit.rundir.records`: the in-memory forms of a run and their frames;
* :mod:`~deepecgkit.rundir.cache`: the discovery cache and tree states;
* :mod:`~deepecgkit.rundir.synthetic`: plantable synthetic corpora.

It imports nothing of deepecgkit but :mod:`deepecgkit.io` (checked by
``tests/test_architecture.py``), so producers and consumers both depend on it
and never on each other. Importing the package itself loads nothing; import
the module you need.
"""
