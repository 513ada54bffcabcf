"""One seed of the real-weights table: its rows trained, scored and recorded.

The rows (every one from multilingual-e5-small): ``e5 zero-shot``; the CARE recipe (the ``e5`` preset, one
:class:`~care.train.recipes.plan.RecipePlan`: :func:`care_run`) and its stages — ``symmetric small`` (init_query),
``symmetric large`` (init_document), ``CARE w/o Stage II`` (Stage I), ``CARE`` (Stage II); ``peer`` (sentence-
transformers' trainer); ``CARE w/o Stage I``; the ``--variant`` rows, each trained on the CARE row's finished stages it
does not change (:func:`care.train.recipes.sweep.train_variant`); symmetric large with a variant's Stage II; weight
soups (:func:`soup`); CARE with other query depths; the student against frozen e5 documents; ONNX int8 query towers
(:func:`int8_specs`); and zero-shot scores on other tasks. :func:`run_seed` returns the record's scores, specs and
timings (every step resumes); :func:`seed_record` is the record ``real_weights/<split>[_<tag>]_seed<K>``.
"""

from __future__ import annotations

import argparse
import json
import logging
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from care.bench.locations import portable
from care.bench.record import BenchmarkRecord
from care.bench.selection import add_selections
from care.experiments.real_weights import EXPERIMENT
from care.experiments.real_weights.peer import PEER_ROW, peer_config, peer_settings
from care.experiments.real_weights.split import PROBE_FOLDER, Prepared, finished, score_rows
from care.experiments.real_weights.towers import (
    CONFIGS,
    E5_OPTIONS,
    e5_cuts,
    e5_spec,
    length_settings,
    model_spec,
    setting_texts,
)
from care.train.engine.trainer import read_result
from care.train.recipes.plan import RecipePlan
from care.train.recipes.recipe import MINED_FILE, RecipeConfig, RecipePaths, run_recipe
from care.train.recipes.sweep import share_mined_file, stage_folder, train_variant
from care.train.recipes.validation import ValidationConfig
from care.train.recipes.variants import NAME_PATTERN, Variant
from care.train.stage_settings import StageSetting

logger = logging.getLogger("bench_real_weights")

WALL_SECONDS_FILE = "wall_seconds.json"  # per seed folder: wall time per step, added up over resumed invocations
#: The peer's training time in seed folders trained before st-mnrl wrote ``train_result.json``.
LEGACY_PEER_TIME_FILE = "peer_train_time.json"
#: The rows a seed may be recorded without (``--skip-rows``).
SKIPPABLE_ROWS = {"peer": PEER_ROW, "without_stage1": "CARE w/o Stage I", "care": "CARE"}
#: The CARE recipe's initialisations: what ``--skip-rows care`` still trains (unless finished) for the variants.
INIT_STAGES = ("init_query", "init_document")
#: ``CARE w/o Stage I``: the CARE row's recipe without Stage I, on its initialised towers.
WITHOUT_STAGE1 = Variant("without_stage1", switches={"skip_stage1": True})
#: The Stage I stages whose teacher caches the depth rows share with the CARE row.
STAGE1_STAGES = ("stage1", "stage1_rank")
#: The asymmetric rows whose query tower is also scored as an ONNX int8 export.
INT8_ROWS = ("CARE", "student vs frozen e5")
#: The student row's trainer: ``(prepared split, e5 folder, query cut, seed folder, seed) -> student folder``.
StudentTrainer = Callable[[Prepared, Path, Path, Path, int], str]


def check_tag(text: str) -> str:
    """``--tag``, checked before any training: a variant name's characters (letters, digits, ``_ . -``; it becomes
    part of the records' file names).

    Raises:
        argparse.ArgumentTypeError: another character, naming the rule.
    """
    if text and not NAME_PATTERN.fullmatch(text):
        raise argparse.ArgumentTypeError(f"{text!r}: use letters, digits, '_', '.' or '-', starting with a letter or "
                                         "digit (it becomes part of the records' file names)")
    return text


def record_name(split: str, seed: int, tag: str = "") -> str:
    """``<split>_seed<K>``, or ``<split>_<tag>_seed<K>`` for a tagged probe (left out of the summary and the choice)."""
    return f"{split}_{check_tag(tag)}_seed{seed}" if tag else f"{split}_seed{seed}"


def care_run(prep: Prepared, query: Path, document: Path, out: Path, seed: int, care: Variant,
             document_trained: bool = False, teacher_caches: dict[str, Path] | None = None,
             max_length: int | None = None) -> RecipePlan:
    """The CARE recipe (the e5 preset) with the CARE rows' settings ``care``; ``document_trained``: ``document`` is an
    already fine-tuned tower (symmetric large, shared by the trade-off rows, with the main run's teacher caches);
    ``max_length``: both towers' token budget."""
    settings = (StageSetting("seed", seed), StageSetting("runtime.progress_bar", False), *length_settings(max_length),
                *(StageSetting("model.teacher.cache_dir", str(folder), stage)
                  for stage, folder in (teacher_caches or {}).items()))
    paths = RecipePaths(str(query), str(document), str(prep.train_file), str(out), str(prep.alignment_file),
                        str(prep.corpus_file))
    return RecipePlan(paths, str(CONFIGS), (*settings, *care.settings),
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
    kept under ``work/soups/name`` until a source changes (``care.models.averaging.average_once``).

    Raises:
        SystemExit: a member with no row in ``specs``, naming it.
    """
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
    for row in (r for r in INT8_ROWS if r in specs):
        query, _, document = specs[row].removeprefix("asym:").partition("|")
        query, document = (query, document) if document else (specs[row], specs[row])  # a routed CARE folder
        folder = export_query_once(query.replace("&dtype=float32", ""), work / "onnx" / row.replace(" ", "_"))
        out[f"{row}, ONNX int8"] = f"asym:onnx:{folder}?int8=true|{document}"  # exported on the CPU, fp32 first
    return out


def _screen_inits(base: RecipePlan, timer: Any) -> dict[str, str]:
    """``--skip-rows care``: the seed's initialisations (trained first where not finished), as rows."""
    if missing := [s for s in INIT_STAGES if not finished(stage_folder(base, s))]:
        logger.info("--skip-rows care: training the seed's %s first (the CARE recipe's initialisations, in %s)",
                    ", ".join(missing), base.paths.output_dir)
        with timer.step("care"):
            run_recipe(replace(base, stages=INIT_STAGES))
    inits = {stage: read_result(stage_folder(base, stage)) for stage in INIT_STAGES}
    return {"symmetric small": inits["init_query"].query_model, "symmetric large": inits["init_document"].document_model}


def run_seed(args: argparse.Namespace, seed: int, prep: Prepared, e5: Path, cut: Path,
             student: StudentTrainer | None = None) -> dict[str, Any]:
    """Train and score one seed's rows (``args``: ``bench_real_weights``' command line); the record's scores, specs,
    timings and mining. ``student`` trains the student row (none without it)."""
    from care.bench.timing import KeptStepTimer
    from care.train.recipes.st_mnrl import train_st_mnrl

    work = args.work / prep.name / f"seed{seed}"
    cache, timer = args.work / "embedding_cache", KeptStepTimer(work / WALL_SECONDS_FILE)
    care, length = args.care_variant, args.max_length
    base = care_run(prep, cut, e5, work / "care" / "recipe", seed, care, max_length=length)
    specs = {"e5 zero-shot": e5_spec(e5, "float32")}
    if "care" in args.skip_rows:  # a screen of --variant rows: the CARE row's Stage I and II are not trained
        trained = _screen_inits(base, timer)
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
                train_st_mnrl(str(e5), prep.train_file, peer, replace(peer_config(length), seed=seed))
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
                           teacher_caches={s: Path(base.paths.output_dir) / s / "teacher_cache" for s in STAGE1_STAGES},
                           max_length=length)
            share_mined_file(base.paths.output_dir, run.paths.output_dir)
            extra = run_recipe(run)
            specs[f"symmetric small ({layers} layers)"] = model_spec(extra["init_query"].query_model)
            specs[f"CARE ({layers} layers)"] = model_spec(extra["stage2"].care_model)
    if student is not None:
        with timer.step("student"):
            folder = student(prep, e5, cut, work, seed)
            specs["student vs frozen e5"] = f"asym:{folder}?pooling=mean&{E5_OPTIONS}&dtype=float32|{specs['e5 zero-shot']}"
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


def seed_record(args: argparse.Namespace, prep: Prepared, seed: int, result: dict[str, Any]) -> BenchmarkRecord:
    """The record ``real_weights/<split>[_<tag>]_seed<K>`` of :func:`run_seed`'s ``result``: the run's settings
    (the peer's, the query depth, the length, variants, soups, the CARE rows' settings, the rows' specs without
    machine paths), scores and timings; with ``--care-from-validation`` the choice in the selection protocol."""
    from care.experiments.real_weights.choice import variant_selection

    config = {"peer": peer_settings(args.max_length), "recipe": "preset:e5", "layers": args.layers,
              "ffn_width": args.ffn_width, "length_overrides": setting_texts(length_settings(args.max_length)),
              "variants": {v.name: list(v.items) for v in args.variant},
              "symmetric_variants": args.symmetric_variant, "soups": dict(args.soup), "max_train": args.max_train,
              "care_variant": {"name": args.care_variant.name, "settings": list(args.care_variant.items)},
              "specs": portable(result["specs"]), "skipped_rows": args.skip_rows}
    extra = result["extra"]
    if args.care_from_validation:  # the CARE rows' settings were chosen: say on which split, among what
        extra = add_selections(dict(extra), [variant_selection(args.out, args.care_variant)])
    return BenchmarkRecord(EXPERIMENT, record_name(prep.name, seed, args.tag), config=config, seeds=[seed],
                           scores=result["scores"], extra=extra)
