"""``benchmarks/bench_real_weights.py``: a variant's mining follows the e5 preset unless it says otherwise."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks import bench_real_weights as bench


def test_a_variant_without_mining_settings_mines_as_the_preset_does():
    from care.train.presets import folder_recipe_defaults, preset_dir

    overrides, mining = bench._variant_overrides(["stage2:optim.document_lr=1e-4"])
    assert overrides == ["stage2:optim.document_lr=1e-4"]
    assert mining == folder_recipe_defaults(preset_dir("e5"))["mine_negatives"]
    assert mining["n_negatives"] == 1


def test_mine_zero_is_plain_stage2_and_mining_fields_are_kept():
    assert bench._variant_overrides(["stage2:mine=0"]) == ([], None)
    _, mining = bench._variant_overrides(["stage2:mine=2", "stage2:mine.relative_margin=0.02"])
    assert mining == {"n_negatives": 2, "relative_margin": 0.02}


def test_mining_fields_without_a_count_are_refused():
    with pytest.raises(SystemExit, match="stage2:mine=N"):
        bench._variant_overrides(["stage2:mine.range_max=300"])


def test_care_settings_give_the_care_rows_their_own_settings():
    parser = bench.build_parser()
    args = parser.parse_args(["--care-settings", "stage2:mine=0;stage2:optim.lr=4e-5"])
    assert bench.care_variant(args, parser) == ("", ["stage2:mine=0", "stage2:optim.lr=4e-5"])
    assert bench._variant_overrides(bench.care_variant(args, parser)[1]) == (["stage2:optim.lr=4e-5"], None)
    assert bench.care_variant(parser.parse_args([]), parser) == ("", [])  # the preset as shipped
    with pytest.raises(SystemExit):  # two ways of choosing at once
        bench.care_variant(parser.parse_args(["--care-settings", "stage2:mine=0", "--care-from-validation"]), parser)


def test_a_soup_averages_its_variants_once_and_again_when_one_is_retrained(tmp_path):
    import torch
    from safetensors.torch import load_file, save_file

    def model(name: str, value: float) -> str:
        folder = tmp_path / name / "model"
        folder.mkdir(parents=True)
        save_file({"w": torch.full((2,), value)}, str(folder / "model.safetensors"))
        return f"{folder}?dtype=float32"

    specs = {"CARE": model("care", 0.0), "CARE [a]": model("a", 1.0), "CARE [b]": model("b", 5.0)}
    args = bench.build_parser().parse_args(["--soup", "ab=a,b", "--soup", "all=CARE,a,b"])
    assert args.soup == [("ab", ["a", "b"]), ("all", ["CARE", "a", "b"])]
    soup = bench.soup_folder(tmp_path / "work", "ab", ["a", "b"], specs)
    assert load_file(str(soup / "model.safetensors"))["w"].tolist() == [3.0, 3.0]
    built = (soup / "model.safetensors").stat().st_mtime_ns
    assert bench.soup_folder(tmp_path / "work", "ab", ["a", "b"], specs) == soup  # kept: same sources
    assert (soup / "model.safetensors").stat().st_mtime_ns == built
    save_file({"w": torch.full((2,), 9.0)}, str(tmp_path / "b" / "model" / "model.safetensors"))  # b retrained
    bench.soup_folder(tmp_path / "work", "ab", ["a", "b"], specs)
    assert load_file(str(soup / "model.safetensors"))["w"].tolist() == [5.0, 5.0]
    with pytest.raises(SystemExit, match="no row CARE \\[c\\]"):
        bench.soup_folder(tmp_path / "work", "ac", ["a", "c"], specs)


def test_a_tagged_probe_gets_its_own_record_name_outside_the_summary():
    assert bench.record_name("validation", 0) == "validation_seed0"
    tagged = bench.record_name("validation", 0, "frozen_doc")
    assert tagged == "validation_frozen_doc_seed0"
    assert not tagged.startswith("validation_seed")  # what summarise and chosen_variant read
    assert bench.build_parser().parse_args(["--tag", "frozen_doc"]).tag == "frozen_doc"
    with pytest.raises(SystemExit, match="--tag"):
        bench.record_name("test", 1, "a/b")


def test_a_variant_trains_on_the_file_the_care_recipe_already_mined_with_its_settings(tmp_path):
    from care.data.io import write_json, write_jsonl
    from care.train.negatives import MiningConfig, mining_record

    def mined(path: Path, **settings) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_jsonl(path, [{"query": "q", "pos": ["p"], "neg": ["n"]}])
        config = MiningConfig(query_prompt=bench.QUERY_PREFIX, document_prompt=bench.PASSAGE_PREFIX, **settings)
        write_json(mining_record(path), {"config": config.to_dict(), "report": {"rows": 1, "fallback_rows": 0}})
        return path

    preset = bench._variant_overrides([])[1]
    assert bench.mined_elsewhere(tmp_path, preset) is None  # nothing mined yet: the variant mines its own
    recipe_file = mined(tmp_path / "care" / "recipe" / "stage2_train.jsonl", **preset)
    assert bench.mined_elsewhere(tmp_path, preset) == recipe_file
    assert bench.mined_elsewhere(tmp_path, None) is None  # a variant without mining reads no mined file
    two = {**preset, "n_negatives": 2}
    assert bench.mined_elsewhere(tmp_path, two) is None  # other settings: mined again, not reused
    variant_file = mined(tmp_path / "variants" / "mined2_train.jsonl", **two)
    assert bench.mined_elsewhere(tmp_path, two) == variant_file
    reports = bench.mining_reports(tmp_path)  # both files' records reach the benchmark record
    assert set(reports) == {"care/recipe/stage2_train.jsonl", "mined2_train.jsonl"}
    assert reports["mined2_train.jsonl"]["config"]["n_negatives"] == 2


def test_a_trade_off_recipe_gets_the_care_recipes_mined_file_once(tmp_path):
    """--extra-layers: a query tower of another depth mines with the same document tower, so the CARE
    recipe's file (and its record) is copied into that recipe's folder; a file already there is kept, a
    file mined with other settings is not shared, and the copy passes the recipe's own reuse check."""
    from care.data.io import write_json, write_jsonl
    from care.train.negatives import MiningConfig, is_mined_with, mining_record
    from care.train.recipe import MINED_FILE

    preset = bench._variant_overrides([])[1]
    config = MiningConfig(query_prompt=bench.QUERY_PREFIX, document_prompt=bench.PASSAGE_PREFIX, **preset)
    out = tmp_path / "care_L1" / "recipe"
    assert bench.share_mined_file(tmp_path, out, preset) is None  # nothing mined yet: the recipe mines
    source = tmp_path / "care" / "recipe" / MINED_FILE
    source.parent.mkdir(parents=True)
    write_jsonl(source, [{"query": "q", "pos": ["p"], "neg": ["n"]}])
    write_json(mining_record(source), {"config": config.to_dict(), "report": {"rows": 1, "fallback_rows": 0}})
    assert bench.share_mined_file(tmp_path, out, {**preset, "n_negatives": 2}) is None  # other settings
    assert bench.share_mined_file(tmp_path, out, None) is None  # no mining
    copied = bench.share_mined_file(tmp_path, out, preset)
    assert copied == out / MINED_FILE and copied.read_bytes() == source.read_bytes()
    assert is_mined_with(copied, config)
    write_jsonl(copied, [{"query": "q2", "pos": ["p2"], "neg": ["n2"]}])  # mined there already: kept
    assert bench.share_mined_file(tmp_path, out, preset) is None
    assert "q2" in copied.read_text(encoding="utf-8")


def test_summarise_with_a_tag_reads_only_that_tags_records(tmp_path):
    from care.bench.record import BenchmarkRecord, read_records, write_record

    def seed_record(name: str, seed: int, care: float, large: float) -> None:
        scores = {"symmetric large": {"ndcg_at_10": large}, "symmetric small": {"ndcg_at_10": 0.2},
                  "CARE": {"ndcg_at_10": care}}
        write_record(BenchmarkRecord(bench.EXPERIMENT, bench.record_name("test", seed, name), config={},
                                     seeds=[seed], scores=scores), tmp_path)

    seed_record("", 0, 0.10, 0.30)  # a plain CPU record: must not enter the tagged summary
    seed_record("gpu", 0, 0.28, 0.29)
    seed_record("gpu", 1, 0.30, 0.31)
    peerless = read_records(tmp_path, bench.EXPERIMENT)["test_gpu_seed0"]
    peerless.scores[bench.PEER_ROW] = {"ndcg_at_10": 0.295}  # the peer on seed 0 only
    write_record(peerless, tmp_path)
    args = bench.build_parser().parse_args(["--out", str(tmp_path), "--seeds", "0", "1", "--summarise", "--tag", "gpu"])
    bench.summarise(args)
    summary = read_records(tmp_path, bench.EXPERIMENT)["test_gpu"]
    assert summary.seeds == [0, 1]
    assert summary.scores["CARE"]["per_seed"] == [0.28, 0.30]
    assert summary.extra["checks"]["CARE / symmetric large"] == pytest.approx(0.29 / 0.30)
    assert summary.extra["checks"]["peer - symmetric large"] == pytest.approx(0.295 - 0.29)  # seed 0's pair only
    table = (tmp_path / bench.EXPERIMENT / "test_gpu.md").read_text(encoding="utf-8")
    assert "(gpu records), seeds [0, 1]" in table
    assert "e5 cut to 6 strided layers" in table and summary.config["layers"] == [6]  # records without it: the default
    plain = bench.build_parser().parse_args(["--out", str(tmp_path), "--seeds", "0", "1", "--summarise"])
    bench.summarise(plain)
    assert read_records(tmp_path, bench.EXPERIMENT)["test"].scores["CARE"]["per_seed"] == [0.10]


def test_summary_names_the_query_towers_depth_from_the_records(tmp_path):
    from care.bench.record import BenchmarkRecord, read_records, write_record

    scores = {"symmetric large": {"ndcg_at_10": 0.3}, "CARE": {"ndcg_at_10": 0.25}}
    write_record(BenchmarkRecord(bench.EXPERIMENT, bench.record_name("validation", 0, "L3"), config={"layers": 3},
                                 seeds=[0], scores=scores), tmp_path)
    args = bench.build_parser().parse_args(["--out", str(tmp_path), "--seeds", "0", "--validation", "--summarise",
                                            "--tag", "L3"])
    bench.summarise(args)
    assert read_records(tmp_path, bench.EXPERIMENT)["validation_L3"].config["layers"] == [3]
    table = (tmp_path / bench.EXPERIMENT / "validation_L3.md").read_text(encoding="utf-8")
    assert table.splitlines()[0].endswith("e5 cut to 3 strided layers")
