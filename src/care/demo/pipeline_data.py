"""Demo steps 1-2: curate the raw demo texts, then label them into a training file.

``curate``: the demo's unlabelled patient questions (``train/raw_queries.jsonl``) and its training
answers (the positives of ``train/train.jsonl``) are anonymised (:func:`care.curate.anonymise.anonymise_file`)
and diversified with the paper's dynamic-index filter (:func:`care.curate.diversify.diversify_file`).

``label``: each curated question's top-``label_depth`` curated answers are judged
(:func:`care.curate.train_data.build_train`: unanimous positives / negatives, a judged-relevant
answer is never a negative) — by the offline embedding judge, or by the LLM judges of a judges config
(``--judges``). Rows with fewer than ``n_negatives`` judged negatives are topped up with BM25 hard
negatives (:func:`care.train.mining.mine_negatives`). The labelled rows are merged with the
shipped demo training file (its clean, generator-labelled rows; a labelled question that is already
there is dropped) and shuffled (seeded) into ``label/train.jsonl``, so a cap on training rows draws
from both.
"""

from __future__ import annotations

import logging
import random
from pathlib import Path
from typing import Any

from care.data.io import iter_jsonl, write_json, write_jsonl
from care.demo import demo_tasks_root, demo_train_file
from care.demo.pipeline_context import DemoContext
from care.train.mining import mine_negatives
from care.demo.tasks import RAW_QUERIES_FILE, TRAIN_FOLDER
from care.errors import CareError

logger = logging.getLogger(__name__)

OFFLINE_JUDGE_ID = "offline-embedding"


def _training_answers(path: Path) -> list[dict[str, str]]:
    """The distinct positives of a training file as ``{"id", "text"}`` rows, in first-seen order."""
    texts = dict.fromkeys(t for _, row in iter_jsonl(path) for t in row["pos"])
    return [{"id": f"ans{i + 1:04d}", "text": t} for i, t in enumerate(texts)]


def step_curate(ctx: DemoContext) -> dict[str, Any]:
    """Anonymise and diversify the raw questions and the training answers; returns kept / dropped counts."""
    from care.curate.anonymise import anonymise_file
    from care.curate.diversify import DiversifyConfig, diversify_file

    cfg = ctx.config
    out = ctx.dir("curate")
    raw_documents = out / "raw_documents.jsonl"
    write_jsonl(raw_documents, _training_answers(demo_train_file()))
    encoder = ctx.curation_encoder()
    sources = {"queries": demo_tasks_root() / TRAIN_FOLDER / RAW_QUERIES_FILE, "documents": raw_documents}
    thresholds = ({"queries": cfg.hashing_diversify_threshold, "documents": cfg.hashing_diversify_threshold}
                  if cfg.skip_e5 else
                  {"queries": cfg.diversify_query_threshold, "documents": cfg.diversify_document_threshold})
    summary: dict[str, Any] = {"encoder": encoder.name}
    for kind, source in sources.items():
        anonymised = out / f"{kind}.anonymised.jsonl"
        pii = anonymise_file(source, anonymised, report_path=out / f"{kind}.anonymise_report.json",
                             show_progress=cfg.show_progress)
        role = "query" if kind == "queries" else "document"
        config = DiversifyConfig(k=cfg.diversify_k, threshold=thresholds[kind], max_similar=cfg.diversify_max_similar,
                                 seed_size=0, role=role)
        report = diversify_file(anonymised, out / f"{kind}.jsonl", encoder, config,
                                report_path=out / f"{kind}.diversify_report.json", show_progress=cfg.show_progress)
        summary[kind] = {"rows": pii.rows, "anonymised_rows": pii.rows_changed, "pii_removed": pii.removed,
                         "kept": report["kept"], "dropped": report["dropped"], "threshold": thresholds[kind]}
        logger.info("curate %s: %d rows, %d anonymised, kept %d / dropped %d (t=%.2f)", kind, pii.rows,
                    pii.rows_changed, report["kept"], report["dropped"], thresholds[kind])
    ctx.save_memo()
    return summary


def _judges(ctx: DemoContext):
    """``(judges, cache, voting, description)``: the configured LLM judges or the offline embedding judge."""
    from care.curate.judges.cache import JudgmentCache
    from care.curate.voting import VotingConfig

    if ctx.config.judges:
        from care.curate.judges.config import JudgesConfig
        from care.curate.judges.factory import build_judges

        config = JudgesConfig.load(ctx.config.judges)
        return build_judges(config), JudgmentCache(config.cache), config.voting, f"judges config {ctx.config.judges}"
    from care.curate.judges.embedding_judge import EmbeddingJudge

    encoder = ctx.curation_encoder()
    judge = EmbeddingJudge(encoder, ctx.judge_thresholds(), judge_id=f"{OFFLINE_JUDGE_ID}:{encoder.name}")
    cache = JudgmentCache(ctx.dir("label") / "judgments.sqlite")
    return [judge], cache, VotingConfig(), f"offline embedding judge ({encoder.name}, thresholds {judge.thresholds})"


def step_label(ctx: DemoContext) -> dict[str, Any]:
    """Judge each curated question's candidates, top up negatives, merge with the shipped training file."""
    from care.curate.train_data import TrainDataConfig, build_train

    cfg = ctx.config
    curated_queries = ctx.require(ctx.root / "curate" / "queries.jsonl", "curate")
    curated_docs = ctx.require(ctx.root / "curate" / "documents.jsonl", "curate")
    out = ctx.dir("label")
    queries = [row for _, row in iter_jsonl(curated_queries)]
    if cfg.raw_query_limit is not None:
        queries = queries[:cfg.raw_query_limit]
    queries_file = out / "queries.jsonl"
    write_jsonl(queries_file, ({"id": q["id"], "text": q["text"]} for q in queries))
    judges, cache, voting, described = _judges(ctx)
    labelled_file = out / "labelled.jsonl"
    config = TrainDataConfig(depth=cfg.label_depth, max_negatives=cfg.n_negatives)
    with cache:
        try:
            stats = build_train(curated_docs, queries_file, ctx.curation_encoder(), judges, labelled_file, cache=cache,
                                voting=voting, config=config, show_progress=cfg.show_progress)
        except CareError as exc:  # no unanimous positive at all: train on the shipped file alone
            if "wrote no rows" not in str(exc):
                raise
            logger.warning("%s", exc)
            stats = {"rows": 0}
    ctx.save_memo()
    labelled = [row for _, row in iter_jsonl(labelled_file)] if labelled_file.is_file() else []
    pool = [row["text"] for _, row in iter_jsonl(curated_docs)]
    short = sum(len(r["neg"]) < cfg.n_negatives for r in labelled)
    if labelled:
        labelled = mine_negatives(labelled, pool, n=cfg.n_negatives, seed=cfg.seed, keep_existing=True)
    shipped = [row for _, row in iter_jsonl(demo_train_file())]
    known = {r["query"] for r in shipped}
    added = [r for r in labelled if r["query"] not in known]
    merged = [*shipped, *added]
    random.Random(cfg.seed).shuffle(merged)  # a cap on training rows (max_train_examples) then draws from both
    rows = write_jsonl(ctx.train_file, merged)
    summary = {"judge": described, "questions_judged": len(queries), "labelled_rows": len(labelled),
               "labelled_rows_topped_up_with_bm25_negatives": short, "labelled_rows_added": len(added),
               "shipped_rows": len(shipped), "train_rows": rows, "build_train": stats,
               "train_file": str(ctx.train_file)}
    write_json(out / "label_report.json", summary)
    logger.info("label: %d questions judged, %d labelled rows (%d added) + %d shipped rows -> %s",
                len(queries), len(labelled), len(added), len(shipped), ctx.train_file)
    return summary
