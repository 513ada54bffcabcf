"""Stage I probes: which Stage I setting moves CARE's query tower on real weights (issue 15).

Each probe is one Stage I run (the e5 preset's ``stage1.yaml`` plus the probe's overrides) from a
finished ``bench_real_weights.py`` seed: the 6-layer query tower starts from that seed's
``init_query`` (or, with ``start=cut``, from the fine-tuned document tower cut to 6 strided layers;
with ``start=stage1``, from that seed's finished Stage I query tower: more epochs on top of the recipe's;
``ffn=W`` also narrows the starting tower's feed-forward blocks to W neurons, ranked on the training queries,
``care.models.ffn_prune``) and aligns to that seed's frozen, fine-tuned ``init_document`` tower. A probe is scored two ways:

- nDCG@10 of the Stage I CARE model (probe query tower + the frozen document tower), and
- the mean cosine between the probe's and the document tower's *query* vectors (``query: `` + text)
  of the first test queries: how closely the cut reproduces the tower it is aligned to.

The record also scores the frozen document tower on both sides (that seed's symmetric large): each probe's ratio to it.

Probes choose settings, so they score the **validation** split (``--split validation``, the default: the held-out
training queries of ``bench_real_weights.py --validation``, whose seed must have finished ``init_document``); the
record keeps the choice in the selection protocol's block (``extra.selection``, :mod:`care.bench.selection`: every
probe's score, the best, the split). ``--split test`` is refused unless ``--select-on-test`` is given too, and then the
record and its table mark the choice (the issue-15 and issue-41 probes were run so, before this rule).

Probes run one epoch by default (``optim.epochs=1``, a quarter of the preset's Stage I) so several
fit in an hour of two CPU cores; they rank settings, the full recipe confirms the winner. Finished
probes are skipped on rerun (resumable like every stage). The record goes to
``benchmarks/results/real_weights/stage1_probe_<split>_seed<N>.json`` (``stage1_probe_<split>_<tag>_seed<N>`` with
``--tag``) with a markdown table beside it.

Usage::

    python -m benchmarks.bench_real_weights --validation --seeds 0 --max-length 128   # the seed's validation towers
    python -m benchmarks.bench_stage1_probe --seed 0 --max-length 128 \\
        --probe "tau 0.1=loss.temperature=0.1" --probe "tau 0.02=loss.temperature=0.02" \\
        --probe "tau 0.1 + mse x10=loss.temperature=0.1;loss.lambda_mse=10"

Name every setting a probe depends on (``NAME=`` means "the preset as it is now", which changes
with the preset); a probe folder refuses to be rerun under the same name with other settings. The logic is the
package's: :mod:`care.experiments.real_weights.stage1_probe` (the flags, the probes, the record and its table).
"""

from __future__ import annotations

import logging

from care.experiments.real_weights.stage1_probe import build_parser, print_scores, run


def main() -> None:
    args = build_parser(__doc__.split("\n")[0]).parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s", datefmt="%H:%M:%S")
    print_scores(run(args))


if __name__ == "__main__":
    main()
