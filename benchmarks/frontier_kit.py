"""The frontier's travel kit for a GPU machine without jieba (benchmarks/frontier_gpu.sh): the data archive, built
here because Stage I's BM25 negatives need jieba.

    python -m benchmarks.frontier_kit DATA OUT_ARCHIVE [--max-train N] [--tiny N] [--alignment-queries FILE ...]

The archive holds data/<name>/ (the dev set, or with --tiny a small cut of it for a dry run) and
work/test/{train,alignment,alignment_rich}.jsonl: alignment_rich.jsonl is CARE [rich]'s Stage I data, the training
queries and every corpus sentence of 6 to 150 characters, each with one BM25 negative
(``care run``: ``recipes.care.alignment_sentence_max_chars: 150``). With ``--alignment-queries`` /
``--alignment-train-queries`` (unlabelled questions, e.g. the second dev set's) it also holds
``alignment_rich_queries.jsonl``: those rows, then the questions' (``benchmarks.question_alignment``;
frontier_gpu.sh: ``RICH_FILE=alignment_rich_queries.jsonl``), e.g. the CPU probes' data::

    python -m benchmarks.frontier_kit $CARE_DEV_SET .gpu/data.tar.xz \
        --alignment-queries ../shared/data/kuake_qtr_search/corpus.jsonl \
        --alignment-train-queries ../shared/data/kuake_qtr_search/train.jsonl
"""
import argparse
import json
import random
import shutil
import subprocess
import tempfile
from pathlib import Path

from benchmarks.question_alignment import question_texts, write_question_alignment
from benchmarks.real_weights_setup import prepare
from care.data.io import iter_jsonl, write_jsonl
from care.train.recipes.budget_tower import RICH_ALIGNMENT_SENTENCES, RICH_SENTENCE_MAX_CHARS
from care.train.recipes.budget_tower import write_rich_alignment as write_rich

RICH_MAX_CHARS = RICH_SENTENCE_MAX_CHARS  # every corpus sentence of 6..150 characters (the preset: 10,000 of 6..60)


def write_rich_alignment(data: Path, train_file: Path, out: Path, max_train: int | None = None) -> tuple[int, int]:
    """Write CARE [rich]'s Stage I data to ``out`` by the budget's own rule
    (:func:`care.train.recipes.budget_tower.write_rich_alignment`: the training queries of ``train_file``, then the
    sentences of ``data``'s corpus of 6 to :data:`RICH_MAX_CHARS` characters, each with one BM25 negative, needs
    jieba; query-side rows only), so the kit and ``recipes.care.query_speedup`` train on the same data.

    Returns (rows written, corpus sentences among them).
    """
    limit = max_train if max_train is not None else RICH_ALIGNMENT_SENTENCES
    return write_rich(train_file, data / "corpus.jsonl", out, seed=0, limit=limit)


def main() -> None:
    """Build the archive the command line names."""
    p = argparse.ArgumentParser()
    p.add_argument("data", type=Path)
    p.add_argument("archive", type=Path)
    p.add_argument("--max-train", type=int, default=None)
    p.add_argument("--tiny", type=int, default=0, help="cut the dev set to this many test queries (dry run)")
    p.add_argument("--alignment-queries", type=Path, nargs="*", default=[],
                   help="unlabelled question files ({id or _id, text} JSONL) for alignment_rich_queries.jsonl")
    p.add_argument("--alignment-train-queries", type=Path, nargs="*", default=[],
                   help="training files whose queries (labels unused) also join alignment_rich_queries.jsonl")
    a = p.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="kit-"))
    name = a.data.name
    data = tmp / "data" / name
    if a.tiny:  # a small cut of the dev set: the first N test queries, their answers, 40 training rows' answers
        data.mkdir(parents=True)
        qrels = [line.split("\t") for line in (a.data / "test_qrels.tsv").read_text(encoding="utf-8").splitlines()]
        header = qrels[0] if not qrels[0][-1].strip().isdigit() else None
        rows = qrels[1:] if header else qrels
        test = [r for _, r in iter_jsonl(a.data / "test_queries.jsonl")][:a.tiny]
        ids = {str(r.get("id") or r.get("_id")) for r in test}
        keep_rows = [r for r in rows if r[0] in ids]
        train = [r for _, r in iter_jsonl(a.data / "train.jsonl")][:a.max_train or 40]
        corpus = [r for _, r in iter_jsonl(a.data / "corpus.jsonl")]
        wanted = {r[1] for r in keep_rows}
        texts = {t["positive"] for t in train}
        rng = random.Random(0)
        kept = [c for c in corpus if str(c.get("id") or c.get("_id")) in wanted or c.get("text") in texts]
        kept += rng.sample([c for c in corpus if c not in kept], 100)
        write_jsonl(data / "corpus.jsonl", kept)
        write_jsonl(data / "train.jsonl", train)
        write_jsonl(data / "test_queries.jsonl", test)
        (data / "test_qrels.tsv").write_text("\n".join("\t".join(r) for r in ([header] if header else []) + keep_rows)
                                             + "\n", encoding="utf-8")
        shutil.copy(data / "test_queries.jsonl", data / "queries.jsonl")
        shutil.copy(data / "test_qrels.tsv", data / "qrels.tsv")
    else:
        shutil.copytree(a.data, data)
        for f in data.rglob("*"):
            f.chmod(0o644 if f.is_file() else 0o755)
        data.chmod(0o755)
    work = tmp / "work"
    prep = prepare(data, work, False, "", a.max_train)
    rows, sentences = write_rich_alignment(data, prep.train_file, work / "test" / "alignment_rich.jsonl", a.max_train)
    base = sum(1 for _ in iter_jsonl(prep.alignment_file))
    kit = {"alignment_rows": base, "alignment_rich_rows": rows, "sentences": sentences, "rich_max_chars": RICH_MAX_CHARS}
    if a.alignment_queries or a.alignment_train_queries:
        questions = question_texts(a.alignment_queries, a.alignment_train_queries)
        kit["alignment_rich_queries"] = write_question_alignment(
            work / "test" / "alignment_rich.jsonl", questions, work / "test" / "alignment_rich_queries.jsonl")
        kit["questions"] = {"files": [str(f) for f in [*a.alignment_queries, *a.alignment_train_queries]],
                            "texts": len(questions)}
    print(json.dumps(kit))  # noqa: T201 - the script's report
    (work / "test" / "kit.json").write_text(json.dumps(kit) + "\n")
    subprocess.run(["tar", "-C", str(tmp), "-cJf", str(a.archive), "data", "work"], check=True)
    shutil.rmtree(tmp)
    print(a.archive, a.archive.stat().st_size)


if __name__ == "__main__":
    main()
