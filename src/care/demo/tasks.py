"""Names, instructions and ``task.json`` metadata of the demo tasks (the paper's instructions)."""

from __future__ import annotations

from typing import Any

RETRIEVAL_TASK = "CMedTEB-Demo-Retrieval"
RERANK_TASK = "CMedTEB-Demo-Rerank"
STS_TASK = "CMedTEB-Demo-STS"
TRAIN_FOLDER = "train"
TRAIN_FILE = "train.jsonl"
RAW_QUERIES_FILE = "raw_queries.jsonl"
MANIFEST_FILE = "manifest.json"
TASK_FILE = "task.json"

RETRIEVAL_INSTRUCTION = "Given a Chinese medical question, retrieve medical documents that answer the question."
RERANK_INSTRUCTION = (
    "Based on a Chinese medical question, evaluate and rank the medical information that provide answers "
    "to the question."
)
STS_INSTRUCTION = "Retrieve semantically similar text."

#: Qrels grade at or above which a document counts as relevant for binary metrics.
RELEVANCE_THRESHOLD = 2


def task_metadata(name: str, task_type: str, description: str, main_score: str, instruction: str) -> dict[str, Any]:
    """One ``task.json`` document in the schema the benchmark harness reads."""
    return {
        "name": name,
        "type": task_type,
        "description": description,
        "main_score": main_score,
        "instruction": instruction,
        "split": None,
        "relevance_threshold": RELEVANCE_THRESHOLD,
        "language": "zh",
    }


def retrieval_metadata() -> dict[str, Any]:
    return task_metadata(
        RETRIEVAL_TASK, "retrieval",
        "Embedded demo: patient questions against doctor-style answers on common conditions across "
        "departments; graded qrels (2 = answers the question, 1 = partially relevant).",
        "ndcg_at_10", RETRIEVAL_INSTRUCTION,
    )


def rerank_metadata() -> dict[str, Any]:
    return task_metadata(
        RERANK_TASK, "rerank",
        "Embedded demo: each question with its answering documents and hard (same condition or same "
        "aspect) plus easy negatives.",
        "map_at_10", RERANK_INSTRUCTION,
    )


def sts_metadata() -> dict[str, Any]:
    return task_metadata(
        STS_TASK, "sts",
        "Embedded demo: synonym STS built from a medical synonym dictionary (positive = synonym swap with "
        "the same meaning, hard negative = synonym swap with a changed meaning, easy negative = changed "
        "meaning without a swap).",
        "pearson", STS_INSTRUCTION,
    )
