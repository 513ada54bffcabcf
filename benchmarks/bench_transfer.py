"""Does CARE keep its gain on data it was not tuned on? A thin driver of ``care run`` on two dev sets.

Per dev set and seed this runs the pipeline on its shipped run config — real weights from one config line
(``models: {query: "e5?layers=6", document: e5}``), the ``e5`` preset, the safety net's validation split — into
``<work>/<dataset>/seed<k>`` (resumable), then records, over seeds, the main task's nDCG@10 (test queries against the
full corpus) and the validation split's of every row, each CARE stage's validation check, the step and stage wall
times and the targets of issue 43 (CARE ≥ 97 % of symmetric large, ≥ symmetric small + 0.02, ≥ e5 zero-shot) to
``benchmarks/results/transfer/<dataset>.json`` and a Markdown table beside it. The logic is the package's:
:mod:`care.experiments.transfer` (the seed runs, the summary), :func:`care.bench.reports.transfer.record_markdown`.

- ``toyhom``: long patient questions -> doctor answers (``configs/runs/care_toyhom_e5.yaml``; ``$CARE_DEV_SET``);
- ``kuake_qtr``: short search queries -> page titles, a BEIR folder (``configs/runs/care_kuake_qtr.yaml``).

Usage::

    python -m benchmarks.bench_transfer --dataset kuake_qtr --seeds 0 1 2
    python -m benchmarks.bench_transfer --dataset kuake_qtr --seeds 0 --without-stored-prompts   # the prompt check
    CARE_DEV_SET=/path/to/toyhom_neike_sample python -m benchmarks.bench_transfer --dataset toyhom --seeds 0
    CARE_DEV_SET=... python -m benchmarks.bench_transfer --dataset toyhom --seeds 1 --keep-recorded-seeds
    python -m benchmarks.bench_transfer --dataset kuake_qtr --seeds 0 1 2 --query-speedup 5

``--query-speedup 5`` runs the same config with one more line, ``recipes.care.query_speedup: 5`` (the query tower
the budget picks, with its recipe: :mod:`care.train.recipes.budget_tower`), into ``<work>/<dataset>_speedup5/`` and
records ``transfer/<dataset>_speedup5.json``, with ``extra.query_budget`` (each seed's pick and measured speed-ups) and
``extra.selection`` (the pick, ``selected_on: speed``; the recipe's settings and the split each was chosen on).

Every record's CARE / symmetric large is given as the ratio of means and per seed (each seed against its own
symmetric large: ``targets["CARE / symmetric large per seed"]``). The code is pinned when the script starts (a
dirty checkout is refused unless ``--allow-dirty``); each seed's commit is the one its ``care run`` manifest pinned.

``--keep-recorded-seeds`` adds the seeds run now to those the dataset's record already holds (a seed run again
replaces its recorded figures), so a CPU can run one seed per sitting, on a machine that kept no run folders.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from benchmarks._common import RUNS, pin_code, run_config_parser
from care.bench.record import BenchmarkRecord, write_record
from care.bench.reports.transfer import record_markdown
from care.bench.selection import SELECTION_KEY
from care.data.io import atomic_write
from care.experiments.transfer import (
    CONFIGS,
    EXPERIMENT,
    TransferConfig,
    recorded_runs,
    run_seed,
    summarise,
    without_stored_prompts,
)

logger = logging.getLogger("bench_transfer")


def main() -> None:
    parser = run_config_parser(__doc__.split("\n")[0], list(CONFIGS), RUNS / "bench_transfer")
    parser.add_argument("--without-stored-prompts", action="store_true",
                        help="score the first seed's finished CARE and symmetric large rows also as care run did before "
                             "model folders carried their prefixes (record <dataset>_without_stored_prompts)")
    parser.add_argument("--query-speedup", type=float, default=None, metavar="X",
                        help="add recipes.care.query_speedup=X to the config (record <dataset>_speedup<X>)")
    parser.add_argument("--keep-recorded-seeds", action="store_true",
                        help="add the seeds run now to those the dataset's record holds (a seed run again is replaced)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s", datefmt="%H:%M:%S")
    pin_code(args.results, args)  # the code that trains, not the checkout's when the record is written
    config = TransferConfig(args.dataset, list(args.set), args.query_speedup)
    config.validate()
    if args.without_stored_prompts:
        path = write_record(without_stored_prompts(config, args.seeds[0], args.work), args.results)
        logger.info("%s: %s", path, json.loads(path.read_text(encoding="utf-8"))["scores"])
        return
    runs: dict[int, dict[str, Any]] = {}
    previous = args.results / EXPERIMENT / f"{config.record_name}.json"
    before = (BenchmarkRecord.from_dict(json.loads(previous.read_text(encoding="utf-8")), str(previous))
              if previous.exists() else None)
    if args.keep_recorded_seeds and before is not None:
        runs = recorded_runs(before, args.dataset)
        logger.info("%s: keeping recorded seeds %s", previous, sorted(set(runs) - set(args.seeds)))
    runs.update({seed: run_seed(config, seed, args.work, allow_dirty=args.allow_dirty) for seed in args.seeds})
    record = summarise(config, runs, before.extra.get(SELECTION_KEY) if before else None)
    path = write_record(record, args.results)
    with atomic_write(path.with_suffix(".md")) as fh:
        fh.write(record_markdown(record))
    logger.info("%s\n%s", path, record_markdown(record))


if __name__ == "__main__":
    main()
