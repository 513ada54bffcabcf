"""The paper's tables at tiny scale (``python -m benchmarks.paper_tables``): tiny base models, training runs, evaluation.

A *run* is one training job of the library (:func:`care.train.recipes.recipe.run_recipe` with ablation
switches, :func:`care.train.recipes.baselines.run_baseline`, or :func:`care.pretrain.trainer.pretrain`),
identified by a name and trained once per seed under ``<work>/<dataset>/seed<k>/runs/<name>``; tables
that need the same run (full CARE is in Tables 4, 5, 6, 7 and 12) share it. A *variant* (one row of a
table) is a run plus which of its models to evaluate. Everything is resumable: the library skips
finished stages (``train_result.json``) and resumes interrupted ones; evaluation results are stored
per (seed, variant, task) and read back on a rerun.

Recipe ablations that keep a stage's inputs and settings unchanged (e.g. "w/o Stage II" keeps both
initialisations of full CARE) link that finished stage folder from the full-CARE run instead of
training it again: the stage would be trained with identical settings and seed.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from care.bench.locations import CONFIGS
from care.config import Override
from care.experiments.datasets import Dataset, prepare_demo, prepare_toyhom
from care.train.stage_settings import StageSetting

logger = logging.getLogger(__name__)

#: Width multiplier of the "larger" tiny Qwen3 document encoder of Table 4 (hidden size and depth).
LARGE_FACTOR = 2
#: Matryoshka widths of ``init_document`` (must include the tower's full width).
MATRYOSHKA = {1: (32, 64, 128), LARGE_FACTOR: (64, 128, 256)}
#: Checkpoint every this many optimiser steps.
CHECKPOINT_EVERY_STEPS = 20
#: Layers the KALE / Wang & Lyu prune step keeps of the 2-layer tiny Qwen3.
PRUNE_LAYERS = 1
#: Demo tasks evaluated (retrieval nDCG@10, rerank MAP@10); toyhom has its retrieval test split only.
DEMO_TASKS = ("CMedTEB-Demo-Retrieval", "CMedTEB-Demo-Rerank")
#: The stages that fine-tune the random-init tiny document tower fully (no LoRA).
FULL_FINE_TUNE_STAGES = ("init_document", "stage2")
#: Baselines with a score-distillation step (its negatives set as the other steps').
DISTILLING_BASELINES = ("scalingnote", "score_distill")


@dataclass
class Sizes:
    """Size knobs of every training run: ``care demo``'s settings, except 5 epochs over up to 512 rows
    (at ``care demo``'s 256 rows x 1 epoch = 8 steps a stage every tiny model stays near random on the
    demo retrieval task: nDCG@10 ~0.02; 5 epochs over its 378 rows gives full CARE ~0.1)."""

    rows: int = 512
    epochs: int = 5
    batch_size: int = 32
    lr: float = 1e-3
    query_max_length: int = 64
    document_max_length: int = 64
    train_negatives: int = 3
    init_negatives: int = 1
    pretrain_steps: int = 200


@dataclass
class Run:
    """One training job.

    Attributes:
        kind: ``recipe``, ``baseline`` or ``pretrain``.
        recipe: :class:`care.train.recipes.recipe.RecipeConfig` fields (kind ``recipe``).
        document: ``small`` (tiny Qwen3) or ``large`` (:data:`LARGE_FACTOR` x wider and deeper).
        share: stages linked from another run (``{stage: run name}``) instead of retrained.
        baseline: baseline name (kind ``baseline``), trained on the full-CARE run's document tower.
        pretrain: ``retromae`` / ``contrastive`` / ``retromae_contrastive`` (kind ``pretrain``).
        query_pretrain: pretrain run whose checkpoint ``init_query`` starts from.
    """

    kind: str = "recipe"
    recipe: dict[str, Any] = field(default_factory=dict)
    document: str = "small"
    share: dict[str, str] = field(default_factory=dict)
    baseline: str | None = None
    pretrain: str | None = None
    query_pretrain: str | None = None


@dataclass(frozen=True)
class Variant:
    """One row of a table: a run and the model of it that is evaluated (a path inside the run folder)."""

    label: str
    run: str
    model: str = "stage2/model"


def load_dataset(name: str, work: Path) -> tuple[Dataset, dict[str, Any]]:
    """The dataset (training file, tokenizer texts) and ``{task name: TaskMetadata}`` evaluated."""
    from care.bench.registry import infer_task
    from care.demo import demo_tasks_root

    work.mkdir(parents=True, exist_ok=True)
    if name == "demo":
        ds = prepare_demo(work)
        return ds, {t: infer_task(demo_tasks_root() / t) for t in DEMO_TASKS}
    ds = prepare_toyhom(work)
    return ds, {ds.task.name: ds.task}


def common_settings(seed: int, sizes: Sizes) -> list[StageSetting]:
    """Training settings shared by every stage (as ``care demo``)."""
    from care.models.instructions import RETRIEVAL_INSTRUCTION, prompt_prefix

    every = {"seed": seed, "runtime.cpu": True, "runtime.log_with": None, "runtime.progress_bar": False,
             "optim.epochs": sizes.epochs, "optim.batch_size": sizes.batch_size, "optim.lr": sizes.lr,
             "optim.grad_cache_chunk_size": None, "model.query_max_seq_length": sizes.query_max_length,
             "model.document_max_seq_length": sizes.document_max_length,
             "checkpoint.every_steps": CHECKPOINT_EVERY_STEPS, "model.query_prompt": prompt_prefix(RETRIEVAL_INSTRUCTION),
             "data.max_examples": sizes.rows}
    return [StageSetting(key, value) for key, value in every.items()]


class SeedWork:
    """Everything of one (dataset, seed): base models, runs, evaluation results."""

    def __init__(self, ds: Dataset, tasks: dict[str, Any], root: Path, seed: int, sizes: Sizes,
                 runs: dict[str, Run]) -> None:
        self.ds, self.tasks, self.root, self.seed, self.sizes, self.runs = ds, tasks, root, seed, sizes, runs
        self.root.mkdir(parents=True, exist_ok=True)

    def run_dir(self, name: str) -> Path:
        return self.root / "runs" / name

    def base(self, document: str) -> tuple[Path, Path]:
        """``(tiny BERT, tiny Qwen3)`` of this seed; ``document="large"`` gives the wider, deeper Qwen3."""
        from care.models.presets import TINY_DOCUMENT_DIRNAME, TINY_QUERY_DIRNAME, TINY_QWEN3, make_tiny_models

        small = self.root / "base"
        if not (small / TINY_DOCUMENT_DIRNAME).is_dir():
            make_tiny_models(self.ds.tokenizer_texts, small, seed=self.seed)
        if document == "small":
            return small / TINY_QUERY_DIRNAME, small / TINY_DOCUMENT_DIRNAME
        large = self.root / "base_large"
        if not (large / TINY_DOCUMENT_DIRNAME).is_dir():
            shape = dataclasses.replace(
                TINY_QWEN3, name=f"tiny-qwen3-x{LARGE_FACTOR}", hidden_size=TINY_QWEN3.hidden_size * LARGE_FACTOR,
                num_hidden_layers=TINY_QWEN3.num_hidden_layers * LARGE_FACTOR,
                head_dim=TINY_QWEN3.head_dim * LARGE_FACTOR, intermediate_size=TINY_QWEN3.intermediate_size * LARGE_FACTOR)
            make_tiny_models(self.ds.tokenizer_texts, large, document_shape=shape, seed=self.seed)
        return small / TINY_QUERY_DIRNAME, large / TINY_DOCUMENT_DIRNAME

    def train(self, name: str) -> Path:
        """Train (or finish) run ``name`` and the runs it depends on; returns its folder."""
        run = self.runs[name]
        out = self.run_dir(name)
        if run.kind == "recipe":
            self._recipe(run, out)
        elif run.kind == "baseline":
            self._baseline(run, out)
        elif run.kind == "pretrain":
            self._pretrain(run, out)
        else:
            raise ValueError(f"unknown run kind {run.kind!r}")
        return out

    def _recipe(self, run: Run, out: Path) -> None:
        from care.train.recipes.plan import RecipeConfig, RecipePaths, RecipePlan
        from care.train.recipes.recipe import run_recipe
        from care.train.recipes.validation import ValidationConfig

        for stage, source in run.share.items():
            src = self.train(source) / stage
            link = out / stage
            if not link.exists():
                out.mkdir(parents=True, exist_ok=True)
                os.symlink(os.path.relpath(src, out), link)
        recipe = dict(run.recipe)
        if run.query_pretrain:
            recipe["pretrained_query_model"] = self.pretrained_model(run.query_pretrain)
        query, document = self.base(run.document)
        dims = MATRYOSHKA[LARGE_FACTOR if run.document == "large" else 1]
        settings = [*common_settings(self.seed, self.sizes),
                    StageSetting("data.n_negatives", self.sizes.train_negatives, "stage2"),
                    StageSetting("data.n_negatives", self.sizes.init_negatives, "init_query"),
                    StageSetting("data.n_negatives", self.sizes.init_negatives, "init_document"),
                    StageSetting("model.truncate_to_query_width", False, "init_document"),
                    StageSetting("loss.matryoshka_dims", list(dims), "init_document"),
                    # random-init tiny "LLM": fully fine-tuned (as care demo)
                    *(StageSetting("model.lora", None, stage) for stage in FULL_FINE_TUNE_STAGES)]
        run_recipe(RecipePlan(RecipePaths(str(query), str(document), str(self.ds.train_file), str(out)),
                              settings=tuple(settings), recipe=RecipeConfig.from_dict(recipe),
                              validation=ValidationConfig(enabled=False)))  # the table holds its own validation data

    def _baseline(self, run: Run, out: Path) -> None:
        from care.train.recipes.baselines import BaselinePaths, run_baseline

        document = self.train("care") / "init_document" / "document"
        query, _ = self.base("small")
        n = self.sizes.train_negatives
        settings = [*common_settings(self.seed, self.sizes), StageSetting("model.lora", None),
                    StageSetting("layers", PRUNE_LAYERS, "prune"), StageSetting("data.n_negatives", n, "align"),
                    StageSetting("data.n_negatives", n, "finetune")]
        if run.baseline in DISTILLING_BASELINES:
            settings.append(StageSetting("data.n_negatives", n, "distill"))
        result = run_baseline(run.baseline, BaselinePaths(str(document), str(self.ds.train_file), str(out),
                                                          query_model=str(query), document_trained=True),
                              tuple(settings))
        link = out / "eval_model"
        if not link.exists():
            os.symlink(os.path.relpath(result.model, out), link)

    def _pretrain(self, run: Run, out: Path) -> None:
        from care.data.io import atomic_write
        from care.pretrain.config import load_pretrain_config
        from care.pretrain.pairs import make_pairs
        from care.pretrain.trainer import pretrain, read_pretrain_result

        if read_pretrain_result(out) is not None:
            return
        texts, pairs = self.root / "pretrain_texts.txt", self.root / "pretrain_pairs.jsonl"
        if not texts.is_file():
            with atomic_write(texts) as fh:
                for text in self.ds.alignment_documents + self.ds.alignment_queries:
                    fh.write(" ".join(text.split()) + "\n")
        if not pairs.is_file():
            corpus = self.root / "pretrain_corpus.jsonl"
            from care.data.io import write_jsonl

            write_jsonl(corpus, ({"id": str(i), "text": t} for i, t in enumerate(self.ds.alignment_documents)))
            make_pairs([corpus], pairs, mode="split")
        query, _ = self.base("small")
        method, start = run.pretrain, query
        if run.pretrain == "retromae_contrastive":
            method, start = "contrastive", self.pretrained_model("pretrain_retromae")
        overrides: list[Override] = [
            ("seed", self.seed), ("output_dir", str(out)), ("model.name_or_path", str(start)),
            ("data.train_files", [str(texts if method == "retromae" else pairs)]),
            ("model.max_seq_length", self.sizes.document_max_length), ("runtime.progress_bar", False),
            ("runtime.log_with", None), ("optim.max_steps", self.sizes.pretrain_steps)]
        config = load_pretrain_config(CONFIGS / "pretrain" / f"{method}_tiny.yaml", overrides)
        pretrain(config, resume=True)

    def pretrained_model(self, name: str) -> str:
        """The checkpoint folder written by pretrain run ``name`` (trained first if needed)."""
        from care.pretrain.trainer import read_pretrain_result

        return str(read_pretrain_result(self.train(name)).model)

    def evaluate(self, variant: Variant) -> dict[str, float]:
        """``{task: main score}`` of the variant (trained first if needed; stored results read back)."""
        from care.bench.options import RunOptions
        from care.bench.runner import evaluate
        from care.data.io import write_json
        from care.encoders.registry import load_model

        results = self.root / "results"
        scores: dict[str, float] = {}
        model = None
        for name, task in self.tasks.items():
            path = results / f"{variant.run}__{variant.model.replace('/', '-')}__{name}.json"
            if not path.is_file():
                if model is None:
                    folder = self.train(variant.run) / variant.model
                    model = load_model(str(folder.resolve()))
                result = evaluate(model, task, RunOptions(show_progress=False), label=variant.label)
                write_json(path, {"main_score": result.main_score, "main_value": result.main_value,
                                  "scores": result.scores})
            stored = json.loads(path.read_text(encoding="utf-8"))
            scores[f"{name} {stored['main_score']}"] = stored["main_value"]
        logger.info("seed %d %s: %s", self.seed, variant.label, scores)
        return scores


def summarise(table: str, title: str, dataset: str, per_seed: dict[int, dict[str, dict[str, float]]],
              variants: list[Variant], settings: dict[str, Any]) -> dict[str, Any]:
    """Mean, sample std and per-seed values of every (variant, metric)."""
    seeds = sorted(per_seed)
    rows = {}
    for v in variants:
        metrics = {}
        for metric in per_seed[seeds[0]][v.label]:
            vals = [per_seed[s][v.label][metric] for s in seeds]
            metrics[metric] = {"mean": statistics.fmean(vals), "std": statistics.stdev(vals) if len(vals) > 1 else 0.0,
                               "per_seed": vals}
        rows[v.label] = metrics
    return {"table": table, "title": title, "dataset": dataset, "seeds": seeds, "rows": rows, "settings": settings}


def to_markdown(summary: dict[str, Any]) -> str:
    """The table as Markdown: ``mean ± std`` per metric, then the per-seed values."""
    metrics = list(next(iter(summary["rows"].values())))
    lines = [f"## Table {summary['table']} ({summary['title']}) — {summary['dataset']}, seeds {summary['seeds']}", "",
             "| variant | " + " | ".join(f"{m} (mean ± std)" for m in metrics) + " | per seed |",
             "|---|" + "---|" * (len(metrics) + 1)]
    for label, row in summary["rows"].items():
        cells = [f"{row[m]['mean']:.4f} ± {row[m]['std']:.4f}" for m in metrics]
        per_seed = "; ".join(", ".join(f"{x:.4f}" for x in row[m]["per_seed"]) for m in metrics)
        lines.append(f"| {label} | " + " | ".join(cells) + f" | {per_seed} |")
    lines += ["", "Settings: `" + json.dumps(summary["settings"], ensure_ascii=False) + "`", ""]
    return "\n".join(lines)
