"""``benchmarks/bench_gpu_shapes.py``'s whole path at tiny shapes on the CPU: :mod:`care.bench.gpu_shapes`,
:mod:`care.train.recipes.stage2_timing`, :func:`care.bench.reports.gpu_shapes.report_lines` (its FLOP count and timing
routines: ``tests/bench/test_encoding_throughput.py``, ``tests/train/test_step_timing.py``)."""

from __future__ import annotations

from care.bench import gpu_shapes
from care.bench.reports.gpu_shapes import report_lines
from care.train.recipes import stage2_timing


def test_tiny_run_times_encoding_and_stops_stage2_after_its_steps(tmp_path):
    setting = gpu_shapes.tiny_setting()
    texts = gpu_shapes.shape_texts(None, 24)
    query_dir, document_dir, params = gpu_shapes.build_towers(texts, tmp_path, setting)
    assert (query_dir / "config.json").is_file() and (document_dir / "config.json").is_file() and params > 0

    encoding = gpu_shapes.bench_encoding(document_dir, texts, 8, params, setting)
    assert encoding["documents"] == 24 and encoding["dim"] == setting.document_shape.hidden_size
    assert 24 <= encoding["tokens"] <= 24 * setting.document_max_length and encoding["tokens_per_s"] > 0

    stage2 = stage2_timing.bench_stage2(query_dir, document_dir, texts, tmp_path, 3, setting)
    assert stage2["steps"] == 3 and len(stage2["losses"]) == 3 and stage2["steady_steps_timed"] == 2
    assert stage2["negatives"] == 3 and stage2["batch_size"] == 4
    # stopped after its steps: no final checkpoint or model folders written
    assert not (tmp_path / "stage2" / "model").exists()
    rows = (tmp_path / "stage2_train.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(rows) == stage2_timing.STAGE2_ROWS

    encoding |= {"fraction_of_datasheet_peak": None, "fraction_of_measured_matmul": 0.5}
    lines = report_lines("CPU", setting, [encoding], [stage2, stage2], 1.0, None, "python x")
    table_row = next(line for line in lines if line.startswith("| 8 |"))
    assert "| 24 |" in table_row and "50%" in table_row
    assert sum("3 steps" in line and "median of 2 after the first" in line for line in lines) == 2
