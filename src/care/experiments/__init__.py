"""The experiments behind ``benchmarks/``: what a driver runs, as functions of the package.

The top layer: an experiment may use every other room (the harness in :mod:`care.bench`, the recipes in
:mod:`care.train`, pretraining, the models) and nothing in ``care`` imports it. The drivers of ``benchmarks/``
are pages over these modules: flags in, a record (:mod:`care.bench.record`) out.
"""
