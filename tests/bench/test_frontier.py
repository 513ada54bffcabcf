"""The frontier (``care.bench.reports.frontier_*``, driven by ``benchmarks/frontier.py``): the record built from small fake real-weights records."""

from __future__ import annotations

import json

import pytest

from care.bench.record import BenchmarkRecord, write_record
from care.bench.reports.frontier_build import build
from care.bench.reports.frontier_report import figure, markdown
from care.bench.reports.frontier_towers import named_groups, query_params, tower_of

SHAPES = {"vocab_size": 50, "hidden_size": 8, "intermediate_size": 16, "max_position_embeddings": 32,
          "type_vocab_size": 2}


def _record(name: str, seed: int, layers: int, scores: dict[str, float], gpu: str | None = "H200") -> BenchmarkRecord:
    return BenchmarkRecord("real_weights", name, config={"layers": layers}, seeds=[seed],
                           scores={label: {"ndcg_at_10": value} for label, value in scores.items()},
                           machine={"gpu": gpu, "cores": 16 if gpu else 2})


def _records() -> dict[str, BenchmarkRecord]:
    records = {}
    for seed in (0, 1):  # the 6-layer table: two seeds, with rows that are no frontier towers
        records[f"test_gpu_seed{seed}"] = _record(f"test_gpu_seed{seed}", seed, 6, {
            "e5 zero-shot": 0.26, "symmetric small": 0.21 + seed / 100, "symmetric large": 0.29 + seed / 100,
            "CARE": 0.28 + seed / 100, "peer (sentence-transformers trainer)": 0.3, "CARE [ep2]": 0.1})
    for seed in (0, 1, 2):  # the shallow towers: three seeds, their own symmetric large
        records[f"test_frontier_seed{seed}"] = _record(f"test_frontier_seed{seed}", seed, 1, {
            "e5 zero-shot": 0.26, "symmetric large": 0.30, "CARE": 0.24, "symmetric small": 0.07,
            "CARE (3 layers)": 0.25 + seed / 100, "symmetric small (3 layers)": 0.09, "BM25": 0.2})
    records["test_frontier_rich_seed0"] = _record("test_frontier_rich_seed0", 0, 1, {
        "symmetric large": 0.32, "CARE": 0.24, "CARE [rich]": 0.256})
    records["test_frontier"] = BenchmarkRecord("real_weights", "test_frontier", config={}, seeds=[0, 1, 2],
                                               latencies={
        "12 layers (symmetric large's query side), ONNX int8": {"p50_ms": 6.0, "large_over_this": 1.0},
        "12 layers (symmetric large's query side), ONNX fp32": {"p50_ms": 12.0, "large_over_this": 1.0},
        "3 layers, ONNX int8": {"p50_ms": 2.0, "large_over_this": 3.0},
        "1 layers, ONNX int8": {"p50_ms": 1.2, "large_over_this": 5.0},
        "1 layers, ONNX fp32": {"p50_ms": 2.0, "large_over_this": 6.0},
        "1 layers, ONNX int8, back to back": {"p50_ms": 0.6, "large_over_this": 9.0},
        "1 layers, ONNX int8, transformers tokenizer call": {"p50_ms": 1.3, "large_over_this": 4.6},
        "_self_check": {"engine": "", "description": "self-check passed", "passed": True},
        "_self_check_back_to_back": {"engine": "", "description": "warm self-check passed", "passed": True}})
    return records


def test_towers_of_labels():
    assert tower_of("CARE", 6) == ("CARE", 6) and tower_of("symmetric small (3 layers)", 1) == ("symmetric small", 3)
    assert tower_of("CARE (1 layer)", 6) == ("CARE", 1) and tower_of("CARE [rich]", 1) == ("CARE [rich]", 1)
    assert tower_of("symmetric large", 1) == ("symmetric large", 12) and tower_of("BM25", 6) == ("BM25", None)
    assert tower_of("CARE [ep2]", 6) is None and tower_of("peer (sentence-transformers trainer)", 6) is None
    assert tower_of("CARE w/o Stage II", 6) is None
    assert tower_of("CARE [rich-questions]", 1) == ("CARE [rich-questions]", 1)  # RICH_FILE=alignment_rich_queries


def test_the_frontier_takes_each_tower_from_the_first_group_with_its_own_seeds(tmp_path):
    record = build(_records(), SHAPES)
    entries = {(e["row"], e["layers"]): e for e in record.extra["frontier"]}
    assert set(entries) == {("CARE", 1), ("CARE", 3), ("CARE", 6), ("CARE [rich]", 1), ("symmetric small", 1),
                            ("symmetric small", 3), ("symmetric small", 6), ("symmetric large", 12),
                            ("e5 zero-shot", 12), ("BM25", None)}
    assert [e["row"] for e in record.extra["frontier"]][:4] == ["CARE", "CARE", "CARE", "CARE [rich]"]
    care6, care3, rich = entries[("CARE", 6)], entries[("CARE", 3)], entries[("CARE [rich]", 1)]
    assert care6["seeds"] == [0, 1] and care6["records"] == ["test_gpu_seed0", "test_gpu_seed1"]
    assert care6["ndcg_at_10_mean"] == pytest.approx(0.285) and care6["ndcg_at_10_std"] > 0
    assert care6["ratio_to_symmetric_large"] == pytest.approx(0.285 / 0.295)  # the same records' symmetric large
    assert care3["seeds"] == [0, 1, 2] and care3["ratio_to_symmetric_large"] == pytest.approx(0.26 / 0.30)
    assert rich["seeds"] == [0] and rich["ndcg_at_10_std"] == 0.0
    assert rich["ratio_to_symmetric_large"] == pytest.approx(0.256 / 0.32)
    large = entries[("symmetric large", 12)]
    assert large["seeds"] == [0, 1] and large["ratio_to_symmetric_large"] == pytest.approx(1.0)  # from the gpu group
    assert entries[("CARE", 1)]["seeds"] == [0, 1, 2]  # the rich record's copy of CARE is not counted twice
    assert (rich["speedup_int8"], rich["speedup_fp32"], rich["int8_qps"]) == (5.0, 6.0, pytest.approx(1000 / 1.2))
    assert (care3["speedup_int8"], care3["speedup_fp32"]) == (3.0, None)  # fp32 not measured: no number
    assert (rich["speedup_int8_back_to_back"], rich["int8_p50_ms_back_to_back"]) == (9.0, 0.6)
    assert care3["speedup_int8_back_to_back"] is None and rich["speedup_fp32_back_to_back"] is None
    # the tokenizer-call row is another engine, not a tower: it changes no entry
    assert care6["speedup_int8"] is None and entries[("BM25", None)]["params"] is None
    assert entries[("symmetric large", 12)]["speedup_int8"] == 1.0
    assert record.seeds == [0, 1, 2] and record.scores["CARE (1 layer)"]["ndcg_at_10"] == pytest.approx(0.24)
    table = markdown(record)
    assert "| CARE [rich] (1 layer) |" in table and "0.2560 (seed 0)" in table and "self-check passed" in table
    assert "| 5.00× | 6.00× | 1.20 | 9.00× |" in table and "Back to back: warm self-check passed." in table
    path = write_record(record, tmp_path)
    assert json.loads(path.read_text(encoding="utf-8"))["extra"]["frontier"][0]["row"] == "CARE"


def test_records_of_a_later_frontier_run_join_by_their_tag():
    records = _records()
    records["test_frontier_L0_seed0"] = _record("test_frontier_L0_seed0", 0, 0, {
        "symmetric large": 0.30, "CARE": 0.15, "symmetric small": 0.01, "CARE [rich]": 0.18})
    records["test_frontier"].latencies["0 layers, ONNX int8"] = {"p50_ms": 0.4, "large_over_this": 14.0}
    entries = {(e["row"], e["layers"]): e for e in build(records, SHAPES).extra["frontier"]}
    static, rich = entries[("CARE", 0)], entries[("CARE [rich]", 0)]
    assert static["records"] == ["test_frontier_L0_seed0"] and static["speedup_int8"] == 14.0
    assert static["ratio_to_symmetric_large"] == pytest.approx(0.5) and rich["ndcg_at_10_mean"] == 0.18
    assert static["params_transformer"] == 0 and entries[("symmetric small", 0)]["seeds"] == [0]
    assert entries[("CARE", 1)]["records"] == ["test_frontier_seed0", "test_frontier_seed1", "test_frontier_seed2"]


def test_a_group_named_by_its_tag_joins_last_paired_with_its_own_symmetric_large(tmp_path):
    """``--group cpu_x``: a CPU run's records add their variant behind every other group; its ratio is against the
    CPU seeds' own symmetric large, and the table names the machine of seeds that are not the references'."""
    from care.bench.reports.frontier import frontier_table

    records = _records()
    for seed, (care, large) in enumerate([(0.285, 0.29), (0.275, 0.30)]):
        name = f"test_cpu_x_seed{seed}"
        records[name] = _record(name, seed, 1, {"symmetric large": large, "CARE [lr]": care, "CARE [rich]": 0.1,
                                                "symmetric small": 0.05}, gpu=None)
    record = build(records, SHAPES, variants=("rich", "lr"), extra_groups=named_groups(["cpu_x"]))
    entries = {(e["row"], e["layers"]): e for e in record.extra["frontier"]}
    lr = entries[("CARE [lr]", 1)]
    assert lr["records"] == ["test_cpu_x_seed0", "test_cpu_x_seed1"] and lr["group"] == "cpu_x"
    assert lr["ratio_to_symmetric_large"] == pytest.approx(0.28 / 0.295) and lr["speedup_int8"] == 5.0
    # each seed against its own symmetric large, beside the ratio of means: a seed that fell short shows
    assert lr["ratio_to_symmetric_large_per_seed"] == pytest.approx([0.285 / 0.29, 0.275 / 0.30])
    assert entries[("CARE [rich]", 1)]["records"] == ["test_frontier_rich_seed0"]  # earlier groups come first
    assert entries[("symmetric large", 12)]["group"] == "gpu"
    assert record.config["machines"] == {"gpu": "H200", "frontier": "H200", "frontier_rich": "H200",
                                         "cpu_x": "CPU, 2 cores"}
    assert "`test_cpu_x_seedK` (CPU, 2 cores)" in markdown(record)
    write_record(record, tmp_path)
    table = frontier_table(tmp_path)
    row = "| 1 layer [lr] | 5.00× | 9.00× | 6.00× | 0.280 ± 0.007 (94.9%; 98.3, 91.7) | – | 0, 1 (CPU, 2 cores) |"
    assert row in table
    assert "| 1 layer [rich] | 5.00× | 9.00× | 6.00× | 0.256 ± 0.000 (80.0%) | – | 0 |" in table
    with pytest.raises(SystemExit, match="--group 'a b'"):
        named_groups(["a b"])


def test_a_narrowed_run_gets_its_own_rows_timings_and_table_line(tmp_path):
    """A record whose query tower was narrowed (config ``ffn_width``) gives ``CARE [FFN W]`` rows with the narrowed
    timings; its extra depths and the 12-layer points stay plain."""
    from care.bench.reports.frontier import frontier_table

    records = _records()
    records["test_frontier_L4_ffn8_seed0"] = BenchmarkRecord(
        "real_weights", "test_frontier_L4_ffn8_seed0", config={"layers": 4, "ffn_width": 8}, seeds=[0],
        scores={name: {"ndcg_at_10": value} for name, value in {
            "symmetric large": 0.30, "CARE": 0.27, "symmetric small": 0.2, "CARE [rich]": 0.28,
            "CARE (2 layers)": 0.22, "e5 zero-shot": 0.26}.items()})
    latencies = records["test_frontier"].latencies
    latencies["4 layers, FFN 8, ONNX int8"] = {"p50_ms": 1.5, "large_over_this": 4.0}
    latencies["4 layers, FFN 8, ONNX int8, back to back"] = {"p50_ms": 1.0, "large_over_this": 6.0}
    latencies["4 layers, ONNX int8"] = {"p50_ms": 2.0, "large_over_this": 3.0}
    record = build(records, SHAPES)
    entries = {(e["row"], e["layers"]): e for e in record.extra["frontier"]}
    narrow = entries[("CARE [FFN 8]", 4)]
    assert (narrow["ffn_width"], narrow["speedup_int8"], narrow["speedup_int8_back_to_back"]) == (8, 4.0, 6.0)
    assert narrow["params_transformer"] == query_params({**SHAPES, "intermediate_size": 8}, 4)["params_transformer"]
    assert narrow["params_transformer"] < query_params(SHAPES, 4)["params_transformer"]
    assert entries[("CARE [rich, FFN 8]", 4)]["ndcg_at_10_mean"] == 0.28
    assert entries[("symmetric small [FFN 8]", 4)]["ndcg_at_10_mean"] == 0.2
    assert entries[("CARE", 2)]["ffn_width"] is None and ("CARE", 4) not in entries  # extra depths stay plain
    write_record(record, tmp_path)
    table = frontier_table(tmp_path)
    assert "| 4 layers [FFN 8] | 4.00× | 6.00× | – | 0.270 ± 0.000 (90.0%) | 0.200 ± 0.000 (66.7%) | 0 |" in table
    assert "| 4 layers [rich, FFN 8] |" in table and "symmetric small [" not in table


def test_parameter_counts_match_a_bert_tower():
    transformers = pytest.importorskip("transformers")
    config = transformers.BertConfig(vocab_size=50, hidden_size=8, num_hidden_layers=3, num_attention_heads=2,
                                     intermediate_size=16, max_position_embeddings=32, type_vocab_size=2)
    model = transformers.BertModel(config, add_pooling_layer=False)
    counted = query_params(SHAPES, 3)
    assert counted["params"] == sum(p.numel() for p in model.parameters())
    assert counted["params_transformer"] == sum(p.numel() for p in model.encoder.parameters())
    assert query_params(None, 3) == {"params": None, "params_transformer": None}


def test_no_records_stops_with_a_message():
    with pytest.raises(SystemExit, match="test_gpu_seedK"):
        build({}, SHAPES)


def test_the_figure_is_written(tmp_path):
    pytest.importorskip("matplotlib")
    png = figure(build(_records(), SHAPES), tmp_path / "frontier.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def _baselines(bm25: float) -> BenchmarkRecord:
    """The harness's reference-model record as ``bench_baselines`` writes it (BM25 on the dev set's test split)."""
    return BenchmarkRecord("baselines", "reference_models", config={}, scores={"toyhom": {"models": {
        "bm25": {"retrieval": {"task": "toyhom-test-retrieval", "scores": {"ndcg_at_10": bm25}}}}}})


def test_bm25_is_a_point_scored_by_the_harness_and_timed_beside_the_12_layer_graph(tmp_path):
    from care.bench.reports.frontier_towers import BM25_LATENCY

    records = _records()
    for name in ("test_frontier_seed0", "test_frontier_seed1", "test_frontier_seed2"):
        del records[name].scores["BM25"]  # as on the dev set: the real-weights runs do not score BM25
    records["test_cpu_x"] = BenchmarkRecord("real_weights", "test_cpu_x", config={}, seeds=[0], latencies={
        BM25_LATENCY: {"p50_ms": 2.5, "large_over_this": 2.0, "engine": "bm25s"},
        BM25_LATENCY + ", back to back": {"p50_ms": 1.5, "large_over_this": 3.0, "engine": "bm25s"}})
    assert all(e["row"] != "BM25" for e in build(records, SHAPES).extra["frontier"])  # neither scored nor timed
    untimed = build(records, SHAPES, baselines=_baselines(0.18))
    bm25 = next(e for e in untimed.extra["frontier"] if e["row"] == "BM25")
    assert bm25["int8_qps"] is None and "latency_record" not in bm25 and "has no query encoder" not in markdown(untimed)
    record = build(records, SHAPES, baselines=_baselines(0.18), extra_groups=named_groups(["cpu_x"]))
    bm25 = record.extra["frontier"][-1]
    assert (bm25["row"], bm25["layers"], bm25["seeds"], bm25["ndcg_at_10_mean"]) == ("BM25", None, [], 0.18)
    assert bm25["ratio_to_symmetric_large"] == pytest.approx(0.18 / 0.295)  # symmetric large of the gpu group
    assert (bm25["speedup_int8"], bm25["speedup_int8_back_to_back"], bm25["latency_record"]) == (2.0, 3.0, "test_cpu_x")
    assert bm25["int8_qps"] == pytest.approx(2.0 * 1000 / 6.0)  # on the towers' clock: 12 layers ran 6 ms there
    assert record.config["bm25"] == {"score": "baselines/reference_models", "latency": "test_cpu_x"}
    table = markdown(record)
    assert "| BM25 | – | 0.1800 ± 0.0000 | – (deterministic) | 61.0% | 2.00× |" in table
    assert "`real_weights/test_cpu_x.json`" in table and "2.50 ms" in table
    from care.bench.reports.frontier import frontier_table

    write_record(record, tmp_path)
    row = "| BM25 (no query tower: a whole search) | 2.00× | 3.00× | – | 0.180 ± 0.000 (61.0%) | – | deterministic |"
    assert row in frontier_table(tmp_path)
    write_record(untimed, tmp_path)
    assert "BM25" not in frontier_table(tmp_path)  # not on the speed axis: no row
    pytest.importorskip("matplotlib")
    assert figure(record, tmp_path / "f.png").is_file()


def test_a_bm25_row_of_the_records_gets_the_timing_instead_of_a_second_point():
    from care.bench.reports.frontier_towers import BM25_LATENCY

    records = _records()
    records["test_frontier"].latencies[BM25_LATENCY] = {"p50_ms": 3.0, "large_over_this": 2.0}
    entries = [e for e in build(records, SHAPES, baselines=_baselines(0.18)).extra["frontier"] if e["row"] == "BM25"]
    assert len(entries) == 1 and entries[0]["seeds"] == [0, 1, 2] and entries[0]["ndcg_at_10_mean"] == 0.2
    assert entries[0]["speedup_int8"] == 2.0 and entries[0]["latency_record"] == "test_frontier"


def test_the_frontier_checks_a_group_tag_as_a_run_checks_its_tag():
    from care.bench.reports.frontier_towers import TAG_PATTERN
    from care.train.recipes.variants import NAME_PATTERN

    assert TAG_PATTERN.pattern == NAME_PATTERN.pattern
