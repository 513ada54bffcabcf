"""The static query tower on TEST, once, with the setting its validation screen chose (issue 59): a thin driver.

Per seed this runs ``care run configs/runs/static_<dataset>.yaml --set seed=S`` (``models.query: "e5?layers=0"``,
the recipe's Stage I against the frozen e5 document tower, ``recipes.care.stages: [stage1]``, on the first dev set also
Stage II run as the static tower's SFT against frozen e5) into
``<work>/<dataset>/seed<S>`` (resumable; the seeds share one cache), then records the static tower's test nDCG@10 per
seed (the row validation ranks first) beside symmetric large's of the same seed from ``benchmarks/results/transfer/<dataset>.json``, each seed's ratio,
the ratio of means and the target (>= 90 % on every seed) to ``benchmarks/results/static_tower/<dataset>_test.json``.
The logic is :mod:`care.experiments.static_tower`; the setting's choice is the screen's record
(``benchmarks/static_care_screen.py --grid alignment``)::

    nice -n 19 python -m benchmarks.static_tower_test --dataset kuake_qtr --seeds 0 1 2
    (another location: --set inputs.train_file=/path/train.jsonl --set 'inputs.tasks=[/path]')
"""

from __future__ import annotations

import logging

from benchmarks._common import RUNS, pin_code, run_config_parser
from care.bench.record import write_record
from care.experiments.static_tower import (
    CONFIGS,
    reference_scores,
    run_static_seed,
    screen_selections,
    summarise,
)

logger = logging.getLogger("static_tower_test")


def main() -> None:
    parser = run_config_parser(__doc__.split("\n")[0], list(CONFIGS), RUNS / "static_tower_test")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s", datefmt="%H:%M:%S")
    pin_code(args.results, args)
    reference = reference_scores(args.dataset, args.results)  # before hours of training, not after
    runs = {seed: run_static_seed(args.dataset, seed, args.work, overrides=args.set, allow_dirty=args.allow_dirty)
            for seed in args.seeds}
    record = summarise(args.dataset, runs, reference, screen_selections(args.dataset, args.results), args.set)
    path = write_record(record, args.results)
    logger.info("%s: %s; %s", path, {row: s["mean"] for row, s in record.scores.items()}, record.extra["targets"])


if __name__ == "__main__":
    main()
