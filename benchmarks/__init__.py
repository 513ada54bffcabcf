"""The benchmark scripts: each writes records to ``benchmarks/results/``; run them from the repository root as
``python -m benchmarks.<name>`` (:mod:`benchmarks._common` says where they find data and results)."""
