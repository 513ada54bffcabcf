"""STS task runner: cosine similarity of the two sentences' embeddings (both encoded in the task's
``sts_role``, by default the query role with the task instruction, as the paper does), scored by
Pearson (main) and Spearman correlation with the gold scores. A pair with a sentence no model can
take is refused before any encoding (:mod:`care.bench.query_check`; ids ``pair{i}.sentence1`` /
``pair{i}.sentence2``, ``i`` the pair's position in the file from 0) and left out of the correlation."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from care.bench.encoding import DOCUMENT, QUERY, encode_collection
from care.bench.metrics import correlation_metrics
from care.bench.options import RunOptions
from care.bench.query_check import check_queries, report_long_queries
from care.bench.registry import split_files_of
from care.bench.task import TaskMetadata
from care.bench.timing import PhaseTimer
from care.data.sts import STSPair, load_sts
from care.encoders.base import Encoder, LexicalRetriever
from care.encoders.cache import EmbeddingCache


def sts_file(task: TaskMetadata) -> Path:
    """``{split}_sts.jsonl`` when the task has a split (refused when that file is missing), else ``sts.jsonl``."""
    return split_files_of(task)[0]


def _scored_pairs(pairs: list[STSPair], task: TaskMetadata) -> tuple[list[STSPair], dict[str, str]]:
    """The pairs whose two sentences are kept, and the refused ``{pair{i}.sentenceN: reason}``."""
    sentences = {f"pair{i}.sentence{n}": text for i, p in enumerate(pairs) for n, text in ((1, p.sentence1), (2, p.sentence2))}
    refused = check_queries(sentences, task.name)
    kept = [p for i, p in enumerate(pairs) if f"pair{i}.sentence1" not in refused and f"pair{i}.sentence2" not in refused]
    return kept, refused


def run_sts(
    model: Encoder | LexicalRetriever, task: TaskMetadata, options: RunOptions, cache: EmbeddingCache | None, timer: PhaseTimer,
) -> tuple[dict[str, float], dict[str, int], dict[str, Any], dict[str, str]]:
    """Evaluate an STS task; returns ``(scores, stats, settings, refused sentences {id: reason})``."""
    with timer.phase("load_s"):
        pairs, refused = _scored_pairs(load_sts(sts_file(task)), task)
    stats = {"n_pairs": len(pairs), "n_refused_queries": len(refused)}
    if isinstance(model, Encoder):
        sentences = list(dict.fromkeys(s for p in pairs for s in (p.sentence1, p.sentence2)))
        position = {s: i for i, s in enumerate(sentences)}
        if task.sts_role == QUERY:
            long = report_long_queries(model, sentences, task.instruction, task.name)
            if long is not None:
                stats["n_long_queries"] = long
        phase = "encode_queries_s" if task.sts_role == QUERY else "encode_documents_s"
        with timer.phase(phase):
            emb = encode_collection(
                model, cache, role=QUERY if task.sts_role == QUERY else DOCUMENT,
                ids=[str(i) for i in range(len(sentences))], texts=sentences, instruction=task.instruction,
                batch_size=options.batch_size, show_progress=options.show_progress, desc=f"{model.name} {task.name} sentences",
            )
        with timer.phase("search_s"):
            a = np.asarray(emb[[position[p.sentence1] for p in pairs]], dtype=np.float64)
            b = np.asarray(emb[[position[p.sentence2] for p in pairs]], dtype=np.float64)
            norms = np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1)
            predicted = (a * b).sum(axis=1) / np.maximum(norms, np.finfo(np.float64).tiny)
        settings: dict[str, Any] = {"similarity": "cosine", "sts_role": task.sts_role}
    else:
        with timer.phase("search_s"):
            predicted = np.array([float(model.score(p.sentence1, [p.sentence2])[0]) for p in pairs])
        settings = {"similarity": "lexical score"}
    with timer.phase("metrics_s"):
        scores = correlation_metrics(predicted, [p.score for p in pairs])
    return {m: scores[m] for m in task.scores}, stats, settings, refused
