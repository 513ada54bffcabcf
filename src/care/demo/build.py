"""Generate the embedded demo benchmark and demo training data (deterministic, no model, no network).

Regenerate the shipped files with::

    python -m care.demo.build --output src/care/demo/data
"""

from __future__ import annotations

import argparse
import logging
import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from care.data.io import write_json, write_jsonl
from care.data.rerank import RerankExample, write_rerank
from care.data.retrieval import Document, write_retrieval_folder
from care.data.sts import STSPair, write_sts
from care.demo import tasks
from care.demo.cells import Cell, RelevanceScheme, all_cells, validate_content
from care.demo.config import DEFAULT_SEED, DemoConfig
from care.demo.content import ASPECTS, CONDITIONS, PROTECTED_PHRASES, RELATED_ASPECTS, SYNONYM_GROUPS
from care.demo.corpus import DemoDocument, build_documents
from care.demo.lexicon import SynonymLexicon
from care.demo.questions import DemoQuery, build_questions
from care.demo.rerank import build_rerank
from care.demo.sts import DemoSTSPair, compose_sts_pairs
from care.demo.training import TrainExample, build_raw_queries, compose_train_examples

logger = logging.getLogger(__name__)


@dataclass
class DemoBundle:
    """Everything the generator produces, with the cell labels kept (files drop them)."""

    config: DemoConfig
    cells: list[Cell]
    scheme: RelevanceScheme
    lexicon: SynonymLexicon
    documents: list[DemoDocument]
    queries: list[DemoQuery]
    qrels: dict[str, dict[str, int]]
    rerank: list[RerankExample]
    sts: list[DemoSTSPair]
    train_documents: list[DemoDocument]
    train_queries: list[DemoQuery]
    train: list[TrainExample]
    raw_queries: list[dict[str, str]]

    def counts(self) -> dict[str, int]:
        """Sizes of every generated part (also written to the manifest)."""
        return {
            "conditions": len({c.condition.key for c in self.cells}),
            "aspects": len({c.aspect.key for c in self.cells}),
            "synonym_groups": len(self.lexicon.groups),
            "documents": len(self.documents),
            "queries": len(self.queries),
            "qrels_grade_2": sum(g == 2 for row in self.qrels.values() for g in row.values()),
            "qrels_grade_1": sum(g == 1 for row in self.qrels.values() for g in row.values()),
            "rerank_examples": len(self.rerank),
            "rerank_candidates": sum(len(r.positive) + len(r.negative) for r in self.rerank),
            "sts_pairs": len(self.sts),
            "sts_positive": sum(p.kind == "positive" for p in self.sts),
            "train_rows": len(self.train),
            "train_documents": len(self.train_documents),
            "raw_queries": len(self.raw_queries),
        }


def _qrels(queries: Sequence[DemoQuery], documents: Sequence[DemoDocument], scheme: RelevanceScheme) -> dict[str, dict[str, int]]:
    qrels: dict[str, dict[str, int]] = {}
    ordered = sorted(documents, key=lambda d: d.id)
    for query in queries:
        row = {d.id: g for d in ordered if (g := scheme.grade(query.cell, d.cell)) > 0}
        qrels[query.id] = row
    return qrels


def build_demo(config: DemoConfig | None = None) -> DemoBundle:
    """Generate the demo in memory; same ``config`` -> same output, byte for byte once written."""
    config = config or DemoConfig()
    lexicon = SynonymLexicon(SYNONYM_GROUPS, PROTECTED_PHRASES)
    validate_content(CONDITIONS, ASPECTS, lexicon, min_facts=config.facts_per_doc_max)
    cells = all_cells(CONDITIONS, ASPECTS)
    scheme = RelevanceScheme(RELATED_ASPECTS)

    def rng(component: str) -> random.Random:
        return random.Random(config.stream(component))

    per_cell = (config.docs_per_cell_min, config.docs_per_cell_max)
    documents = build_documents(cells, rng("corpus"), lexicon, config, per_cell=per_cell, id_prefix="d")
    queries = build_questions(cells, rng("queries"), lexicon, config, split="bench",
                              per_cell=config.bench_queries_per_cell, id_prefix="q")
    bench_texts = frozenset(q.text for q in queries)
    rerank = build_rerank(queries, documents, scheme, rng("rerank"), config)
    sts = compose_sts_pairs(lexicon.groups, rng("sts"), config)
    benchmark_sentences = bench_texts | {s for p in sts for s in (p.sentence1, p.sentence2)}
    train_documents = build_documents(
        cells, rng("train-corpus"), lexicon, config,
        per_cell=(config.train_docs_per_cell, config.train_docs_per_cell), id_prefix="t",
        exclude=frozenset(d.text for d in documents),
    )
    train_queries = build_questions(cells, rng("train-queries"), lexicon, config, split="train",
                                    per_cell=config.train_queries_per_cell, id_prefix="tq",
                                    exclude=benchmark_sentences)
    train = compose_train_examples(train_queries, train_documents, scheme, rng("train"), config)
    raw = build_raw_queries(cells, rng("raw"), lexicon, config, exclude=benchmark_sentences)
    return DemoBundle(
        config=config, cells=cells, scheme=scheme, lexicon=lexicon, documents=documents, queries=queries,
        qrels=_qrels(queries, documents, scheme), rerank=rerank, sts=sts, train_documents=train_documents,
        train_queries=train_queries, train=train, raw_queries=raw,
    )


def write_bundle(bundle: DemoBundle, out_dir: str | Path) -> dict[str, int]:
    """Write the task folders, training files and ``manifest.json`` under ``out_dir``; return the counts."""
    out = Path(out_dir)
    retrieval = out / tasks.RETRIEVAL_TASK
    write_retrieval_folder(
        retrieval,
        [Document(d.id, d.text) for d in sorted(bundle.documents, key=lambda d: d.id)],
        {q.id: q.text for q in bundle.queries},
        bundle.qrels,
    )
    write_json(retrieval / tasks.TASK_FILE, tasks.retrieval_metadata())
    write_rerank(out / tasks.RERANK_TASK / "rerank.jsonl", bundle.rerank)
    write_json(out / tasks.RERANK_TASK / tasks.TASK_FILE, tasks.rerank_metadata())
    write_sts(out / tasks.STS_TASK / "sts.jsonl", (STSPair(p.sentence1, p.sentence2, p.score) for p in bundle.sts))
    write_json(out / tasks.STS_TASK / tasks.TASK_FILE, tasks.sts_metadata())
    write_jsonl(out / tasks.TRAIN_FOLDER / tasks.TRAIN_FILE, (row.to_json() for row in bundle.train))
    write_jsonl(out / tasks.TRAIN_FOLDER / tasks.RAW_QUERIES_FILE, bundle.raw_queries)
    counts = bundle.counts()
    write_json(out / tasks.MANIFEST_FILE, {
        "generator": "python -m care.demo.build",
        "config": bundle.config.to_dict(),
        "counts": counts,
    })
    return counts


def write_demo(out_dir: str | Path, seed: int = DEFAULT_SEED, config: DemoConfig | None = None) -> dict[str, int]:
    """Generate the demo with ``seed`` (or a full ``config``) and write it under ``out_dir``.

    Returns:
        The counts of each generated part.
    """
    if config is None:
        config = DemoConfig(seed=seed)
    counts = write_bundle(build_demo(config), out_dir)
    logger.info("wrote the demo benchmark to %s: %s", out_dir, counts)
    return counts


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m care.demo.build", description=__doc__.splitlines()[0])
    parser.add_argument("--output", required=True, type=Path, help="folder to write the task folders into")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED, help=f"generator seed (default {DEFAULT_SEED})")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    write_demo(args.output, seed=args.seed)


if __name__ == "__main__":
    main()
