"""Tables and reports of the experiments, generated from their records (``benchmarks/results/<experiment>/*.json``).

One module per table (:mod:`~care.bench.reports.frontier`, :mod:`~care.bench.reports.transfer`,
:mod:`~care.bench.reports.pii`, :mod:`~care.bench.reports.demo`, :mod:`~care.bench.reports.real_weights`, ...);
:mod:`~care.bench.reports.sections` lists them (``TABLES``) and fills the ``<!-- results:NAME -->`` sections of
README.md and docs/*.md; ``care bench report`` (:mod:`~care.bench.reports.cli`) runs it.
"""
