"""Our task folders as ``mteb`` custom tasks: :func:`to_mteb_task` returns an mteb ``AbsTask``
(retrieval, reranking or STS) that loads the folder through care's validating loaders.

The task's instruction becomes mteb's ``prompt`` (the query-side prompt for retrieval / rerank),
which :class:`~care.bench.mteb_bridge.MTEBEncoderAdapter` passes to ``encode_queries``.
"""

from __future__ import annotations

from typing import Any

from datasets import Dataset
from mteb.abstasks.retrieval import AbsTaskRetrieval
from mteb.abstasks.retrieval_dataset_loaders import RetrievalSplitData
from mteb.abstasks.sts import AbsTaskSTS
from mteb.abstasks.task_metadata import TaskMetadata as MTEBTaskMetadata

from care.bench.rerank import rerank_file
from care.bench.sts import sts_file
from care.bench.task import TaskMetadata
from care.data.rerank import load_rerank
from care.data.retrieval import load_retrieval_folder
from care.data.sts import load_sts
from care.errors import CareError

_MTEB_TYPES = {"retrieval": "Retrieval", "rerank": "Reranking", "sts": "STS"}
#: mteb language code for our ``zh`` (Simplified Chinese).
_LANGS = {"zh": "cmn-Hans", "en": "eng-Latn"}
#: Split name mteb sees when our task has none.
DEFAULT_MTEB_SPLIT = "test"


def _mteb_metadata(meta: TaskMetadata) -> MTEBTaskMetadata:
    split = meta.split or DEFAULT_MTEB_SPLIT
    main = {"retrieval": "ndcg_at_10", "rerank": "map_at_10", "sts": "pearson"}[meta.type]
    if meta.type == "sts":
        main = "pearson" if meta.main_score == "pearson" else "spearman"
    elif meta.main_score in ("ndcg_at_10", "map_at_10", "mrr_at_10", "map_at_1000", "recall_at_10", "recall_at_100"):
        main = meta.main_score
    prompt: Any = meta.instruction
    if meta.instruction and meta.type in ("retrieval", "rerank"):
        prompt = {"query": meta.instruction}
    return MTEBTaskMetadata(
        name=meta.name,
        description=meta.description or f"care task folder {meta.path}",
        reference=None,
        dataset={"path": str(meta.path), "revision": "local"},
        type=_MTEB_TYPES[meta.type],
        category="t2t",
        modalities=["text"],
        eval_splits=[split],
        eval_langs=[_LANGS.get(meta.language, "cmn-Hans")],
        main_score=main,
        date=None,
        domains=["Medical"],
        task_subtypes=[],
        license="not specified",
        annotations_creators="derived",
        dialect=[],
        sample_creation="found",
        bibtex_citation="",
        prompt=prompt,
    )


def _retrieval_split(meta: TaskMetadata) -> RetrievalSplitData:
    data = load_retrieval_folder(meta.path, split=meta.split)
    corpus = Dataset.from_list([{"id": d.id, "text": d.text, "title": d.title} for d in data.corpus.values()])
    queries = Dataset.from_list([{"id": q, "text": t} for q, t in data.queries.items()])
    return RetrievalSplitData(corpus=corpus, queries=queries, relevant_docs=data.qrels, top_ranked=None)


def _rerank_split(meta: TaskMetadata) -> RetrievalSplitData:
    examples = load_rerank(rerank_file(meta))
    corpus_rows, queries, qrels, top = [], [], {}, {}
    for i, ex in enumerate(examples):
        qid = f"q{i}"
        queries.append({"id": qid, "text": ex.query})
        ids = []
        for kind, texts in (("p", ex.positive), ("n", ex.negative)):
            for j, text in enumerate(texts):
                did = f"{qid}-{kind}{j}"
                corpus_rows.append({"id": did, "text": text, "title": ""})
                ids.append(did)
        qrels[qid] = {did: int(did.split("-")[1].startswith("p")) for did in ids}
        top[qid] = ids
    return RetrievalSplitData(
        corpus=Dataset.from_list(corpus_rows), queries=Dataset.from_list(queries), relevant_docs=qrels, top_ranked=top,
    )


def to_mteb_task(meta: TaskMetadata) -> Any:
    """Return an mteb task instance for a care task folder (``meta.path`` must be set)."""
    if meta.path is None:
        raise CareError(f"task {meta.name!r} has no data folder; resolve it with care.bench.registry.get_task first")
    split = meta.split or DEFAULT_MTEB_SPLIT
    mteb_meta = _mteb_metadata(meta)

    if meta.type == "sts":
        def load_sts_data(self: AbsTaskSTS, num_proc: int | None = None, **kwargs: Any) -> None:
            pairs = load_sts(sts_file(meta))
            self.dataset = {split: Dataset.from_dict({
                "sentence1": [p.sentence1 for p in pairs], "sentence2": [p.sentence2 for p in pairs],
                "score": [p.score for p in pairs],
            })}
            self.data_loaded = True

        pairs = load_sts(sts_file(meta))
        scores = [p.score for p in pairs]
        cls = type(f"CareSTS_{abs(hash(meta.name))}", (AbsTaskSTS,), {
            "metadata": mteb_meta, "load_data": load_sts_data, "min_score": min(scores), "max_score": max(scores),
        })
        return cls()

    loader = _retrieval_split if meta.type == "retrieval" else _rerank_split

    def load_retrieval_data(self: AbsTaskRetrieval, num_proc: int | None = None, **kwargs: Any) -> None:
        self.dataset = {"default": {split: loader(meta)}}
        self.data_loaded = True

    cls = type(f"CareRetrieval_{abs(hash(meta.name))}", (AbsTaskRetrieval,), {"metadata": mteb_meta, "load_data": load_retrieval_data})
    return cls()
