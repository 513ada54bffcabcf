"""The dev set's prepared split for the real-weights runs, and the scorer of their rows.

:func:`prepare` writes, once per split under ``work/<test|validation>/``: the training rows ({query, pos}), the scored
task (the test split, or the held-out validation queries: whole answer groups, :mod:`care.data.splits`) and Stage I's
alignment data (training queries + answer sentences, one negative each, mined by BM25 or by e5). :func:`score_rows`
scores model specs on the split's task with the safety net's scorer
(:class:`~care.train.recipes.validation.StageValidator`: scores kept by model fingerprint, vectors in an embedding
cache), so a rerun encodes nothing it scored before.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from care.data.io import iter_jsonl, write_jsonl
from care.train.engine.trainer import read_result
from care.train.recipes.validation import StageValidator, ValidationConfig

#: Validation hold-out (care.data.splits, whole answer groups): share of the training rows, fixed seed.
VALIDATION_SHARE, VALIDATION_SEED = 0.1, 20261125
#: Short answer sentences added to Stage I's query-side alignment texts (care.train.recipes.alignment_data; no
#: document-side rows: the e5 student did as well without them, benchmarks/results/e5_student ..._sent10000_nodoc).
ALIGNMENT_SENTENCES = 10000
#: Seed of the alignment data's sentence sample and negatives.
ALIGNMENT_SEED = 0
#: Batch of the dense (e5) negative miner.
DENSE_MINER_BATCH = 256
#: Where bench_stage1_probe trains its probes inside a seed's folder.
PROBE_FOLDER = "stage1_probe"
#: Cosine at which two e5 passage vectors count as the same answer (--diagnose: in-batch copies masked).
DUPLICATE_THRESHOLD = 0.98


@dataclass
class Prepared:
    """What the runs of one split need: training, alignment and corpus files, the scored task folder and split."""

    name: str
    train_file: Path
    alignment_file: Path
    corpus_file: Path
    task_dir: Path
    split: str | None = None


def finished(folder: Path) -> bool:
    """A training stage in ``folder`` completed (its ``train_result.json`` says so)."""
    result = read_result(folder)
    return result is not None and result.completed


def prepare(data: Path, work: Path, validation: bool, e5: str, max_train: int | None,
            dense_miner: bool = False) -> Prepared:
    """Training rows ({query, pos}), the scored task (test split, or the held-out validation queries) and Stage I
    alignment data (training queries + answer sentences, one negative each, mined by BM25 — or by the e5 spec ``e5``
    with ``dense_miner``, where jieba is not installed) of the dev set ``data``, under ``work``; files already
    written are kept."""
    from care.data.retrieval import load_corpus
    from care.data.splits import hold_out_by_positive, write_validation_task
    from care.encoders.registry import load_model
    from care.train.recipes.alignment_data import DenseNegativeMiner, build_alignment_data, document_sentences

    folder = work / ("validation" if validation else "test")
    folder.mkdir(parents=True, exist_ok=True)
    rows = [{"query": r["query"], "pos": [r["positive"]]} for _, r in iter_jsonl(data / "train.jsonl")]
    task_dir, split = data, "test"
    if validation:
        rows, held = hold_out_by_positive(rows, VALIDATION_SHARE, VALIDATION_SEED)
        task_dir, split = write_validation_task(held, data / "corpus.jsonl", folder / "task"), None
    rows = rows[:max_train] if max_train else rows
    if not (folder / "train.jsonl").is_file():
        write_jsonl(folder / "train.jsonl", rows)
    if not (folder / "alignment.jsonl").is_file():
        documents = [d.text for d in load_corpus(data / "corpus.jsonl").values()]
        queries = [r["query"] for r in rows] + document_sentences(documents, limit=max_train or ALIGNMENT_SENTENCES,
                                                                  seed=ALIGNMENT_SEED)
        miner = DenseNegativeMiner(load_model(e5), batch_size=DENSE_MINER_BATCH) if dense_miner else None
        write_jsonl(folder / "alignment.jsonl", build_alignment_data(queries, [], negative_miner=miner,
                                                                     seed=ALIGNMENT_SEED))
    return Prepared(folder.name, folder / "train.jsonl", folder / "alignment.jsonl", data / "corpus.jsonl",
                    Path(task_dir), split)


def score_rows(specs: dict[str, str], prep: Prepared, folder: Path, cache_dir: Path,
               task_dir: Path | None = None) -> dict[str, dict]:
    """nDCG@10 and Recall@100 of every row (``{label: model spec}``) on ``prep``'s task (or ``task_dir``), kept in
    ``folder/scores.json`` by model fingerprint (the safety net's scorer), vectors in the embedding cache
    ``cache_dir``."""
    validator = StageValidator(task_dir or prep.task_dir, folder, ValidationConfig(), cache_dir=cache_dir,
                               split=None if task_dir else prep.split)
    return {row: dict(validator.score(row, spec).scores) for row, spec in specs.items()}
