"""The query side trained alone against frozen e5 documents: the table's ``student vs frozen e5`` row
(:func:`train_student`) and, with ``python -m benchmarks.bench_real_weights --diagnose``, why fine-tuning e5's query
side that way scored below zero-shot e5 (the fine-tune one change at a time, and how often a training answer has a
near-copy in its batch). Run through ``bench_real_weights``.
"""

from __future__ import annotations

import logging
from pathlib import Path
from urllib.parse import quote

from benchmarks._common import portable
from benchmarks.real_weights_setup import (
    CONFIGS,
    DUPLICATE_THRESHOLD,
    EXPERIMENT,
    LENGTH_OVERRIDES,
    Prepared,
    e5_spec,
    finished,
    score_rows,
)
from care.bench.record import BenchmarkRecord, write_record
from care.data.io import iter_jsonl
from care.encoders.registry import load_model
from care.models.e5_export import QUERY_PREFIX
from care.train.engine.config import TrainConfig, apply_overrides, load_config
from care.train.engine.trainer import train

logger = logging.getLogger("bench_real_weights")


def train_student(prep: Prepared, e5: Path, cut: Path, out: Path, seed: int) -> str:
    """The 6-layer cut aligned to, then fine-tuned against, frozen e5 documents (stage1 + stage1_sft)."""
    teacher = ["model.teacher.kind=encoder", f"model.teacher.spec={e5_spec(e5, 'float32')}",
               "model.teacher.query_side_as_queries=true", "model.document_model=null"]
    s1, sft = out / "student_stage1", out / "student_sft"
    for stage, folder, start, file, extra in (
            ("stage1", s1, cut, prep.alignment_file, teacher),
            ("stage1_sft", sft, s1 / "query", prep.train_file,
             [t for t in teacher if "query_side" not in t] + ["optim.lr=5e-5", "optim.epochs=2", "data.n_negatives=0",
                                                              "loss.temperature=0.02"])):
        if not finished(folder):
            data = apply_overrides(load_config(CONFIGS / "stage1.yaml").to_dict(), [
                f"stage={stage}", f"seed={seed}", f"output_dir={folder}", f"model.query_model={start}",
                f"data.train_file={file}", f"model.teacher.cache_dir={out / 'e5_teacher_cache'}",
                "runtime.progress_bar=false", *LENGTH_OVERRIDES, *extra])
            train(TrainConfig.from_dict(data), resume=True)
    return str(sft / "query")


def run_diagnosis(prep: Prepared, e5: Path, seeds: list[int], work: Path, out: Path) -> None:
    """Per seed: the diagnosis' scores and the near-duplicate shares, as the record ``diagnosis_<split>_seed<K>``."""
    for seed in seeds:
        folder = work / prep.name / f"seed{seed}"
        scores = diagnose(prep, e5, folder, seed, work / "embedding_cache")
        duplicates = near_duplicate_share(prep, e5, folder / "diagnosis" / "teacher_cache", DUPLICATE_THRESHOLD, seed)
        logger.info("near-duplicate answers: %s", duplicates)
        write_record(BenchmarkRecord(EXPERIMENT, f"diagnosis_{prep.name}_seed{seed}",
                                     config={"e5": portable(e5), "length_overrides": LENGTH_OVERRIDES},
                                     seeds=[seed], scores=scores, extra={"near_duplicates": duplicates}), out)


def near_duplicate_share(prep: Prepared, e5: Path, cache_dir: Path, threshold: float, seed: int,
                         batch_size: int = 32, draws: int = 2000) -> dict[str, dict]:
    """How often a training answer has a near-copy — in the whole training set, and inside a random
    batch of ``batch_size`` rows, where the copy would act as a false negative (the peer's
    ``no_duplicates`` sampler removes exact copies only). Two definitions of a near-copy: cosine ≥
    ``threshold`` under frozen e5 with ``passage: `` (what ``loss.duplicate_threshold`` masks; the
    vectors the diagnosis' trainings cached in ``cache_dir``), and character-bigram Jaccard overlap ≥
    the alignment data's near-duplicate bound (``care.train.recipes.alignment_data``). ``draws`` random batches.
    """
    import numpy as np
    import scipy.sparse as sparse

    from care.train.engine.teacher import TeacherEmbeddings
    from care.train.recipes.alignment_data import DEFAULT_MAX_CHAR_OVERLAP, char_bigrams

    positives = [row["pos"][0] for _, row in iter_jsonl(prep.train_file)]
    vectors = TeacherEmbeddings.compute(load_model(e5_spec(e5, "float32")), positives, cache_dir).lookup(positives)
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


def diagnose(prep: Prepared, e5: Path, work: Path, seed: int, cache_dir: Path) -> dict[str, dict]:
    """Why did fine-tuning e5's query side alone, against frozen e5 documents, score below zero-shot e5?

    One change at a time from the setting measured before (e5's 12 layers, 1 epoch, batch 32, lr 2e-5,
    τ 0.02, in-batch negatives; trained without e5's ``query: `` prefix, evaluated with the paper's
    task instruction): the prefix at training and evaluation, the documents embedded with or without
    ``passage: ``, in-batch near-duplicate answers masked, a larger learning rate with two epochs.
    """
    from care.models.instructions import RETRIEVAL_INSTRUCTION, prompt_prefix

    instruction = quote(prompt_prefix(RETRIEVAL_INSTRUCTION))
    no_passage = f"{e5}?pooling=mean&query_prefix={quote(QUERY_PREFIX)}&instructions=false&dtype=float32"
    settings = {  # name -> (training query prompt, teacher / evaluation document spec, extra overrides)
        "trained without query: (as before)": (None, e5_spec(e5, "float32"), []),
        "query: in training and evaluation": (QUERY_PREFIX, e5_spec(e5, "float32"), []),
        "query: , documents without passage:": (QUERY_PREFIX, no_passage, []),
        "query: , near-duplicate answers masked": (QUERY_PREFIX, e5_spec(e5, "float32"),
                                                   [f"loss.duplicate_threshold={DUPLICATE_THRESHOLD}"]),
        "query: , lr 5e-5, 2 epochs": (QUERY_PREFIX, e5_spec(e5, "float32"), ["optim.lr=5e-5", "optim.epochs=2"]),
    }
    specs = {"untrained, paper instruction (as evaluated before)":
             f"asym:{e5}?pooling=mean&query_prefix={instruction}&instructions=false&dtype=float32|{e5_spec(e5, 'float32')}",
             "untrained, query: (e5 zero-shot)": e5_spec(e5, "float32")}
    for i, (name, (prompt, docs, extra)) in enumerate(settings.items()):
        folder = work / "diagnosis" / f"sft{i}"
        if not finished(folder):
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
    return score_rows(specs, prep, work / "diagnosis", cache_dir)

