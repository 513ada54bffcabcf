"""mteb's C-MTEB medical tasks (CmedqaRetrieval, MedicalRetrieval, CMedQAv1/v2-reranking) in care.

They are registered like any task: ``care bench --task CmedqaRetrieval`` reads
``<data-root>/CmedqaRetrieval/`` (our folder formats); when that is missing, the data is taken from
the local Hugging Face datasets cache through mteb (offline) and exported once, in our formats, to
``<care cache>/mteb/<task>/``. When neither exists the error names the dataset repository and how to
fetch it on a machine with internet (``python -m care.bench.mteb_cmteb TASK OUT_ROOT``).

Metric names are explicit: mteb scores CMedQA reranking by MAP@1000, the paper by MAP@10 — our
results record ``map_at_10`` as main and ``map_at_1000`` beside it.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from care.bench.cmedteb import CMEDTEB_TASKS
from care.bench.task import RERANK_FILE, RETRIEVAL_FILES, TaskMetadata
from care.data.rerank import RerankExample, write_rerank
from care.data.retrieval import Document, write_retrieval_folder
from care.encoders.cache import default_cache_dir
from care.errors import CareError

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class MTEBSource:
    """Where mteb gets a task's data and which split the task evaluates."""

    repo: str
    split: str
    type: str


MTEB_SOURCES: dict[str, MTEBSource] = {
    "CmedqaRetrieval": MTEBSource("mteb/CmedqaRetrieval", "dev", "retrieval"),
    "MedicalRetrieval": MTEBSource("mteb/MedicalRetrieval", "dev", "retrieval"),
    "CMedQAv1-reranking": MTEBSource("mteb/CMedQAv1-reranking", "test", "rerank"),
    "CMedQAv2-reranking": MTEBSource("mteb/CMedQAv2-reranking", "test", "rerank"),
}

#: Query instructions for the C-MTEB retrieval tasks (the E5-instruct / Qwen3-Embedding convention).
CMTEB_RETRIEVAL_TASKS: tuple[TaskMetadata, ...] = (
    TaskMetadata(name="CmedqaRetrieval", type="retrieval",
                 instruction="Given a Chinese community medical question, retrieve replies that best answer the question",
                 description="C-MTEB CmedqaRetrieval (cMedQA v2 based), via mteb."),
    TaskMetadata(name="MedicalRetrieval", type="retrieval",
                 instruction="Given a medical question, retrieve user replies that best answer the question",
                 description="C-MTEB MedicalRetrieval, via mteb."),
)


def export_root() -> Path:
    """Folder where tasks exported from the HF cache are kept: ``<care cache>/../mteb``."""
    return default_cache_dir().parent / "mteb"


def _has_task_files(folder: Path, task_type: str) -> bool:
    if task_type == "retrieval":
        return all((folder / f).is_file() for f in RETRIEVAL_FILES)
    return (folder / RERANK_FILE).is_file()


def write_split(split_data: Mapping[str, Any], folder: str | Path, task_type: str) -> Path:
    """Write one mteb ``RetrievalSplitData`` (corpus, queries, relevant_docs, top_ranked) in our formats.

    Retrieval -> ``corpus.jsonl`` / ``queries.jsonl`` / ``qrels.tsv``; rerank -> ``rerank.jsonl`` where
    each query's candidates are its ``top_ranked`` documents, positives those with a qrels grade > 0.
    """
    folder = Path(folder)
    corpus = {str(row["id"]): Document(str(row["id"]), row["text"], row.get("title") or "") for row in split_data["corpus"]}
    queries = {str(row["id"]): row["text"] for row in split_data["queries"]}
    qrels = {str(q): {str(d): int(g) for d, g in row.items()} for q, row in split_data["relevant_docs"].items()}
    if task_type == "retrieval":
        write_retrieval_folder(folder, corpus.values(), queries, qrels)
        return folder
    top = split_data.get("top_ranked") or {}
    examples = []
    for qid, text in queries.items():
        cands = [str(d) for d in top.get(qid, qrels.get(qid, {}))]
        grades = qrels.get(qid, {})
        pos = tuple(corpus[d].full_text for d in cands if grades.get(d, 0) > 0)
        neg = tuple(corpus[d].full_text for d in cands if grades.get(d, 0) <= 0)
        if pos:
            examples.append(RerankExample(text, pos, neg))
    if not examples:
        raise CareError(f"no query with a positive candidate while exporting to {folder}")
    write_rerank(folder / RERANK_FILE, examples)
    return folder


@contextlib.contextmanager
def _hf_offline() -> Iterator[None]:
    """Force Hugging Face hub / datasets into offline mode (read the local cache only)."""
    import datasets.config
    import huggingface_hub.constants as hub_constants

    saved = (hub_constants.HF_HUB_OFFLINE, datasets.config.HF_HUB_OFFLINE)
    hub_constants.HF_HUB_OFFLINE = True
    datasets.config.HF_HUB_OFFLINE = True
    try:
        yield
    finally:
        hub_constants.HF_HUB_OFFLINE, datasets.config.HF_HUB_OFFLINE = saved


def export_mteb_task(name: str, out_root: str | Path, *, offline: bool = False) -> Path:
    """Load an mteb C-MTEB medical task (downloading unless ``offline``) and write it to ``out_root/name``."""
    if name not in MTEB_SOURCES:
        raise CareError(f"{name!r} is not one of the mteb tasks care exports: {', '.join(MTEB_SOURCES)}")
    import mteb

    source = MTEB_SOURCES[name]
    task = mteb.get_task(name)
    with _hf_offline() if offline else contextlib.nullcontext():
        task.load_data()
    dataset = task.dataset
    split_data = dataset["default"][source.split] if "default" in dataset else dataset[source.split]
    return write_split(split_data, Path(out_root) / name, source.type)


def resolve_from_hf_cache(name: str) -> Path | None:
    """Return an exported folder for ``name`` (exporting it from the local HF cache if needed), or None."""
    source = MTEB_SOURCES[name]
    folder = export_root() / name
    if _has_task_files(folder, source.type):
        return folder
    try:
        return export_mteb_task(name, export_root(), offline=True)
    except Exception as exc:  # noqa: BLE001 — any failure means "not available offline"
        logger.debug("%s not in the local HF cache: %s", name, exc)
        return None


def _hint(name: str) -> str:
    source = MTEB_SOURCES[name]
    return (
        f"Its public data is the Hugging Face dataset {source.repo} (split {source.split}): on a machine with internet run "
        f"`python -m care.bench.mteb_cmteb {name} OUT_ROOT` and copy OUT_ROOT/{name} to <data-root>/{name}, "
        "or copy that machine's ~/.cache/huggingface here."
    )


def public_task_registrations() -> list[tuple[TaskMetadata, str, Callable[[], Path | None]]]:
    """``(task, data hint, resolver)`` of every task with public data, for :func:`care.bench.registry.register_task`."""
    by_name = {m.name: m for m in (*CMEDTEB_TASKS, *CMTEB_RETRIEVAL_TASKS)}
    return [(by_name[name], _hint(name), lambda n=name: resolve_from_hf_cache(n)) for name in MTEB_SOURCES]


def main(argv: list[str] | None = None) -> None:
    """``python -m care.bench.mteb_cmteb TASK OUT_ROOT``: download through mteb and export in care's formats."""
    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("task", choices=sorted(MTEB_SOURCES))
    parser.add_argument("out_root", type=Path)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO)
    logger.info("exported to %s", export_mteb_task(args.task, args.out_root))


if __name__ == "__main__":
    main()
