"""``build-train``: retrieve the top-50 candidates of each query, judge them, and write training rows
``{"query", "pos": [...], "neg": [...]}`` — positives are unanimous positives, hard negatives are
unanimous negatives, so a document any judge found relevant is never used as a negative (the
false-negative problem). Stage I's alignment rows from the written file come from
:func:`care.train.recipes.alignment_data.alignment_from_training_file`.

Queries are processed in chunks; each finished chunk is appended to the output (see
:mod:`care.curate.checkpoint`) and every judgment is cached, so a crash resumes without repeating
work; the retrieval run is saved in ``<out>.work/`` and reused on restart.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from care.curate.candidate_pool import load_or_run, load_texts
from care.curate.checkpoint import StreamCheckpoint
from care.curate.judges.base import Judge, JudgePair
from care.curate.judges.cache import JudgmentCache
from care.curate.judges.labelling import label_pairs
from care.curate.judges.voting import NEGATIVE, POSITIVE, VotingConfig
from care.data.io import write_json
from care.data.retrieval import check_corpus, load_queries
from care.data.text_rules import has_visible
from care.encoders.base import Encoder, LexicalRetriever
from care.errors import CareError

logger = logging.getLogger(__name__)


@dataclass
class TrainDataConfig:
    """Settings of :func:`build_train`.

    Attributes:
        depth: candidates retrieved and judged per query (the paper: 50).
        max_negatives: hard negatives kept per query (Stage II uses 7), best-ranked first.
        chunk_queries: queries per checkpointed chunk.
        prompt: optional per-row ``prompt`` (task instruction) written into each row.
        keep_without_positive: also write queries with no judged positive (skipped by default).
    """

    depth: int = 50
    max_negatives: int = 7
    chunk_queries: int = 256
    prompt: str | None = None
    instruction: str | None = None
    keep_without_positive: bool = False

    def __post_init__(self) -> None:
        # --max-negatives -1 sliced neg[:-1] (every row lost its last negative); --depth 0 judged nothing
        if self.depth < 1 or self.chunk_queries < 1:
            raise CareError(f"build-train: --depth (got {self.depth}) and chunk_queries (got {self.chunk_queries}) "
                            "must be at least 1; the paper judges the top 50")
        if self.max_negatives < 0:
            raise CareError(f"build-train: --max-negatives must be 0 or more, got {self.max_negatives}")


def build_train(
    corpus_path: str | Path,
    queries_path: str | Path,
    retriever: Encoder | LexicalRetriever,
    judges: Sequence[Judge],
    out_path: str | Path,
    *,
    cache: JudgmentCache | None = None,
    voting: VotingConfig | None = None,
    config: TrainDataConfig | None = None,
    show_progress: bool = True,
) -> dict[str, Any]:
    """Write the training JSONL; returns a report (also ``<out>.report.json``).

    Raises:
        CareError: no query got a unanimous positive; no training file is written (an empty one is a file
            every reader refuses), the report is.
    """
    config = config or TrainDataConfig()
    voting = voting or VotingConfig()
    check_corpus(corpus_path)  # a bad corpus (e.g. a repeated id) is refused before any retrieval or judging
    queries = load_queries(queries_path)
    run = load_or_run(retriever, corpus_path, queries, config.depth, Path(str(out_path) + ".work"),
                      instruction=config.instruction, show_progress=show_progress)
    checkpoint = StreamCheckpoint(out_path, {"step": "build-train", "corpus": str(corpus_path),
                                             "queries": str(queries_path), "retriever": retriever.fingerprint,
                                             "judges": [[j.id, j.fingerprint] for j in judges], "config": asdict(config),
                                             "voting": voting.to_dict()},
                                  inputs=[corpus_path, queries_path])
    progress = checkpoint.resume()
    stats = progress.state or {"queries": 0, "rows": 0, "positives": 0, "negatives": 0,
                               "skipped_no_positive": 0, "discarded_disagreement": 0}
    stats.setdefault("blank_pairs_not_judged", 0)  # a progress file of a run before blank pairs were counted
    qids = list(queries)
    for start in range(progress.lines_done, len(qids), config.chunk_queries):
        chunk = qids[start:start + config.chunk_queries]
        texts = load_texts(corpus_path, {d for q in chunk for d, _ in run[q]})
        pairs = [JudgePair(q, queries[q], d, texts[d]) for q in chunk for d, _ in run[q]]
        labelled = label_pairs(judges, pairs, cache, voting, show_progress=show_progress)
        stats["blank_pairs_not_judged"] += labelled.blank_pairs
        rows = []
        for q in chunk:
            labels = [(d, labelled.labels.get((q, d), (None, 0))[0]) for d, _ in run[q]]
            pos = [texts[d] for d, lab in labels if lab == POSITIVE]
            neg = [texts[d] for d, lab in labels if lab == NEGATIVE][:config.max_negatives]
            stats["queries"] += 1
            stats["discarded_disagreement"] += sum(1 for d, _ in run[q]
                                                   if (q, d) in labelled.labels and labelled.labels[q, d][0] is None)
            if not pos and (not config.keep_without_positive or not has_visible(queries[q])):
                stats["skipped_no_positive"] += 1
                continue
            row: dict[str, Any] = {"query": queries[q], "pos": pos, "neg": neg}
            if config.prompt:
                row["prompt"] = config.prompt
            rows.append(row)
            stats["rows"] += 1
            stats["positives"] += len(pos)
            stats["negatives"] += len(neg)
        checkpoint.append(rows, lines_done=start + len(chunk), state=stats)
    report_path = Path(str(out_path) + ".report.json")
    write_json(report_path, stats)
    if not stats["rows"]:
        checkpoint.discard()  # an empty training file is one every reader refuses; leave none behind
        raise CareError(f"build-train wrote no rows to {out_path}: no query got a unanimous positive "
                        f"({stats['queries']} queries, {stats['discarded_disagreement']} pairs the judges disagreed on; "
                        f"counts in {report_path}); loosen the judges (their thresholds or voting.positive_grades "
                        "in the judges config) or judge deeper (--depth)")
    checkpoint.finish()
    logger.info("build-train: %s", stats)
    return stats
