"""Steps 1-2 of a run: curate the raw texts, then label them into the run's training file.

``curate``: the raw questions (``inputs.raw_queries``) and the documents (``inputs.raw_documents``, or
the positives of ``inputs.train_file``) are anonymised (:func:`care.curate.pii.anonymiser.anonymise_file`)
and diversified with the paper's dynamic-index filter (:func:`care.curate.diversify.diversify_file`).

``label``: each curated question's top-``label_depth`` curated documents are judged
(:func:`care.curate.train_data.build_train`: unanimous positives / negatives, a judged-relevant
document is never a negative) — by the offline embedding judge, or by the LLM judges of a judges config
(``curate.judges``). The labelled rows are added to the ready training file (a labelled question that
is already there is dropped) and shuffled (seeded), so a cap on training rows draws from both. Rows
with fewer than ``curate.n_negatives`` hard negatives are topped up with BM25 negatives
(:func:`care.train.recipes.bm25_negatives.mine_negatives`) from the curated documents, or from the corpus when nothing
was curated (``label/all.jsonl``). Then the validation split is held out (``validation.share``, whole
query–answer components, :func:`care.train.recipes.validation.carve_validation`, ``label/validation/``); the rest is
``label/train.jsonl``, what every recipe trains on.
"""

from __future__ import annotations

import logging
import random
from pathlib import Path
from typing import Any

from care.data.io import write_json, write_jsonl
from care.data.retrieval import Document, document_row, iter_documents, load_queries
from care.data.training import TrainingExample, iter_training_file, load_training_file, write_training_file
from care.errors import CareError
from care.pipeline.config import HASHING
from care.pipeline.context import RunContext
from care.pipeline.sources import corpus_file
from care.train.recipes.bm25_negatives import mine_negatives

logger = logging.getLogger(__name__)

OFFLINE_JUDGE_ID = "offline-embedding"
#: The hashing encoder's character-gram cosines are low: the diversity threshold it uses.
HASHING_DIVERSIFY_THRESHOLD = 0.8


def _training_answers(path: str | Path) -> list[Document]:
    """The distinct positives of a training file as documents ``ans0001``, ..., in first-seen order."""
    texts = dict.fromkeys(t for row in iter_training_file(path) for t in row.pos)
    return [Document(f"ans{i + 1:04d}", t) for i, t in enumerate(texts)]


def step_curate(ctx: RunContext) -> dict[str, Any]:
    """Anonymise and diversify the raw questions and the documents; returns kept / dropped counts."""
    from care.curate.diversify import DiversifyConfig, diversify_file
    from care.curate.pii.anonymiser import anonymise_file

    cfg, inputs = ctx.config.curate, ctx.config.inputs
    out = ctx.dir("curate")
    documents = inputs.raw_documents
    if documents is None:
        if not inputs.train_file:
            raise CareError("curate: give inputs.raw_documents (or a train_file whose positives are the documents)")
        documents = out / "raw_documents.jsonl"
        write_jsonl(documents, map(document_row, _training_answers(inputs.train_file)))
    encoder = ctx.curation_encoder()
    hashing = cfg.encoder == HASHING
    thresholds = {"queries": HASHING_DIVERSIFY_THRESHOLD if hashing else cfg.query_threshold,
                  "documents": HASHING_DIVERSIFY_THRESHOLD if hashing else cfg.document_threshold}
    summary: dict[str, Any] = {"encoder": encoder.name}
    for kind, source in (("queries", inputs.raw_queries), ("documents", documents)):
        anonymised = out / f"{kind}.anonymised.jsonl"
        pii = anonymise_file(source, anonymised, report_path=out / f"{kind}.anonymise_report.json",
                             show_progress=ctx.config.show_progress)
        role = "query" if kind == "queries" else "document"
        config = DiversifyConfig(k=cfg.diversify_k, threshold=thresholds[kind], max_similar=cfg.diversify_max_similar,
                                 seed_size=0, role=role)
        report = diversify_file(anonymised, out / f"{kind}.jsonl", encoder, config,
                                report_path=out / f"{kind}.diversify_report.json", show_progress=ctx.config.show_progress)
        summary[kind] = {"rows": pii.rows, "anonymised_rows": pii.rows_changed, "pii_removed": pii.removed,
                         "kept": report["kept"], "dropped": report["dropped"], "threshold": thresholds[kind]}
        logger.info("curate %s: %d rows, %d anonymised, kept %d / dropped %d (t=%.2f)", kind, pii.rows,
                    pii.rows_changed, report["kept"], report["dropped"], thresholds[kind])
    ctx.save_memo()
    return summary


def _judges(ctx: RunContext):
    """``(judges, cache, voting, description)``: the configured LLM judges or the offline embedding judge."""
    from care.curate.judges.cache import JudgmentCache
    from care.curate.judges.voting import VotingConfig

    if ctx.config.curate.judges:
        from care.curate.judges.config import JudgesConfig
        from care.curate.judges.factory import build_judges

        config = JudgesConfig.load(ctx.config.curate.judges)
        return (build_judges(config), JudgmentCache(config.cache), config.voting,
                f"judges config {ctx.config.curate.judges}")
    from care.curate.judges.embedding_judge import EmbeddingJudge

    encoder = ctx.curation_encoder()
    judge = EmbeddingJudge(encoder, ctx.judge_thresholds(), judge_id=f"{OFFLINE_JUDGE_ID}:{encoder.name}")
    cache = JudgmentCache(ctx.dir("label") / "judgments.sqlite")
    return [judge], cache, VotingConfig(), f"offline embedding judge ({encoder.name}, thresholds {judge.thresholds})"


def _label_raw_queries(ctx: RunContext, out: Path) -> tuple[list[TrainingExample], dict[str, Any]]:
    """Judge each curated question's candidates; returns the labelled rows and a summary."""
    from care.curate.train_data import TrainDataConfig, build_train

    cfg = ctx.config.curate
    curated_queries = ctx.require(ctx.root / "curate" / "queries.jsonl", "curate")
    curated_docs = ctx.require(ctx.root / "curate" / "documents.jsonl", "curate")
    queries = list(load_queries(curated_queries).items())
    if cfg.raw_query_limit is not None:
        queries = queries[:cfg.raw_query_limit]
    queries_file = out / "queries.jsonl"
    write_jsonl(queries_file, ({"id": qid, "text": text} for qid, text in queries))
    judges, cache, voting, described = _judges(ctx)
    labelled_file = out / "labelled.jsonl"
    labelled_file.unlink(missing_ok=True)  # build_train leaves no file when nothing is labelled: never read an old one
    config = TrainDataConfig(depth=cfg.label_depth, max_negatives=max(cfg.n_negatives, 1))
    with cache:
        try:
            stats = build_train(curated_docs, queries_file, ctx.curation_encoder(), judges, labelled_file, cache=cache,
                                voting=voting, config=config, show_progress=ctx.config.show_progress)
        except CareError as exc:  # no unanimous positive at all: train on the ready file alone
            if "wrote no rows" not in str(exc):
                raise
            logger.warning("%s", exc)
            stats = {"rows": 0}
    ctx.save_memo()
    labelled = load_training_file(labelled_file) if labelled_file.is_file() else []
    return labelled, {"judge": described, "questions_judged": len(queries), "labelled_rows": len(labelled),
                      "build_train": stats}


def _negative_pool(ctx: RunContext) -> list[str]:
    """Texts hard negatives are mined from: the curated documents, else the corpus."""
    curated = ctx.root / "curate" / "documents.jsonl"
    path = curated if curated.is_file() else corpus_file(ctx)
    return [doc.full_text for doc in iter_documents(path)]


def _top_up(ctx: RunContext, rows: list[TrainingExample]) -> tuple[list[TrainingExample], int]:
    """Rows with fewer than ``curate.n_negatives`` negatives topped up with BM25 negatives (others kept as they are)."""
    n = ctx.config.curate.n_negatives
    short = [i for i, row in enumerate(rows) if len(row.neg) < n]
    if not short:
        return rows, 0
    mined = mine_negatives([rows[i] for i in short], _negative_pool(ctx), n=n, seed=ctx.config.seed, keep_existing=True)
    out = list(rows)
    for i, row in zip(short, mined):
        out[i] = row
    return out, len(short)


def step_label(ctx: RunContext) -> dict[str, Any]:
    """Label the curated questions, add them to the ready training file, top up negatives; writes ``label/train.jsonl``."""
    inputs = ctx.config.inputs
    out = ctx.dir("label")
    summary: dict[str, Any] = {}
    labelled: list[TrainingExample] = []
    if inputs.raw_queries:
        labelled, summary = _label_raw_queries(ctx, out)
    ready = load_training_file(inputs.train_file) if inputs.train_file else []
    known = {r.query for r in ready}
    added = [r for r in labelled if r.query not in known]
    merged = [*ready, *added]
    if added and ready:
        random.Random(ctx.config.seed).shuffle(merged)  # a cap on training rows then draws from both
    merged, topped_up = _top_up(ctx, merged)
    write_training_file(ctx.labelled_file, merged)
    validation = _carve_validation(ctx)
    rows = write_training_file(ctx.train_file, load_training_file(validation.train_file) if validation else merged)
    summary.update({"labelled_rows_added": len(added), "ready_rows": len(ready), "rows_topped_up_with_bm25_negatives":
                    topped_up, "train_rows": rows, "train_file": str(ctx.train_file),
                    "validation": {"task": str(validation.task_dir), "held_out_rows": validation.held_out}
                    if validation else None})
    write_json(out / "label_report.json", summary)
    logger.info("label: %d labelled rows added to %d ready rows (%d topped up with BM25 negatives) -> %s",
                len(added), len(ready), topped_up, ctx.train_file)
    if validation:
        logger.info("label: %d rows held out as the validation split (%s): every model is scored on them, and the "
                    "index step serves the best", validation.held_out, validation.task_dir)
    return summary


def _carve_validation(ctx: RunContext):
    """The run's validation split of ``label/all.jsonl`` (:func:`care.train.recipes.validation.carve_validation`), searched
    against the run's corpus; ``None`` when validation is off or the file is too small."""
    from care.train.recipes.validation import carve_validation

    try:
        corpus: Path | None = corpus_file(ctx)
    except CareError:  # no corpus: the held-out queries search the training file's own texts
        corpus = None
    return carve_validation(ctx.labelled_file, corpus, ctx.validation_dir, ctx.config.validation, seed=ctx.config.seed)
