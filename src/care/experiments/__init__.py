"""Experiments over the library: seed loops that train and score through ``care run`` and the recipes, their
records (:mod:`care.bench.record`), the summaries over seeds, and the choices they make on validation.

The layer above :mod:`care.pipeline`, :mod:`care.train` and :mod:`care.bench`: an experiment drives them and nothing
in ``care`` imports it. ``benchmarks/*.py`` are its pages (command lines of a page each):

- :mod:`care.experiments.transfer`: CARE through ``care run`` on two dev sets, per seed (``bench_transfer``);
- :mod:`care.experiments.real_weights`: CARE with real weights against e5 and its baselines (``bench_real_weights``,
  ``bench_stage1_probe``);
- :mod:`care.experiments.student`: the e5-teacher student's seed summary (``bench_student``).
"""
