"""``care.experiments.real_weights`` (``benchmarks/bench_real_weights.py``): the CARE rows' settings, the validation
choice, soups, record names, the summary."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from care.experiments.real_weights import EXPERIMENT
from care.experiments.real_weights.arguments import build_parser
from care.experiments.real_weights.choice import care_variant, chosen_variant
from care.experiments.real_weights.peer import PEER_ROW
from care.experiments.real_weights.seed_rows import care_run, record_name, soup
from care.experiments.real_weights.split import Prepared
from care.experiments.real_weights.summary import summarise
from care.train.recipes.variants import Variant, parse_variant
from care.train.stage_settings import StageSetting


def test_the_care_rows_run_the_e5_preset_with_their_own_settings(tmp_path):
    from care.train.recipes.presets import preset_dir

    prep = Prepared("test", tmp_path / "train.jsonl", tmp_path / "alignment.jsonl", tmp_path / "corpus.jsonl", tmp_path)
    run = care_run(prep, tmp_path / "cut", tmp_path / "e5", tmp_path / "recipe", 3,
                         parse_variant("care=stage2:mine=0;stage2:optim.lr=4e-5"),
                         teacher_caches={"stage1": tmp_path / "cache"})
    assert Path(run.config_dir) == preset_dir("e5") and run.paths.corpus_file == str(tmp_path / "corpus.jsonl")
    assert run.settings == (StageSetting("seed", 3), StageSetting("runtime.progress_bar", False),
                            StageSetting("model.teacher.cache_dir", str(tmp_path / "cache"), "stage1"),
                            StageSetting("optim.lr", "4e-5", "stage2"))
    assert run.seed == 3 and not run.validation.enabled  # the bench scores its rows itself
    assert run.recipe.mine_negatives == {"n_negatives": 0} and not run.recipe.skip_document_init
    plain = care_run(prep, tmp_path / "cut", tmp_path / "e5", tmp_path / "r", 0, Variant(""), document_trained=True)
    assert plain.recipe.mine_negatives is None and plain.recipe.skip_document_init  # the preset's recipe.yaml mines


def test_care_settings_give_the_care_rows_their_own_settings():
    parser = build_parser()
    args = parser.parse_args(["--care-settings", "stage2:mine=0;stage2:optim.lr=4e-5"])
    care = care_variant(args, parser)
    assert (care.name, care.items) == ("", ("stage2:mine=0", "stage2:optim.lr=4e-5"))
    assert care.settings == (StageSetting("optim.lr", "4e-5", "stage2"),) and care.mining == {"n_negatives": 0}
    assert care_variant(parser.parse_args([]), parser) == Variant("")  # the preset as shipped
    with pytest.raises(SystemExit):  # two ways of choosing at once
        care_variant(parser.parse_args(["--care-settings", "stage2:mine=0", "--care-from-validation"]), parser)
    with pytest.raises(SystemExit):  # a bad item is refused by the parser, naming it
        parser.parse_args(["--variant", "x=stage2:mine.range_max=3"])


def test_a_tag_is_checked_when_the_arguments_are_parsed(capsys):
    """A tag that cannot name a file stops the run before it trains (it was checked only when the record was
    written, after hours of training); a learning rate's dot is a tag character, as in a variant's name."""
    parser = build_parser()
    assert parser.parse_args(["--tag", "frontier_rich_lr2.4e-3"]).tag == "frontier_rich_lr2.4e-3"
    assert record_name("test", 0, "frontier_rich_lr2.4e-3") == "test_frontier_rich_lr2.4e-3_seed0"
    for bad in ("a/b", "x y", ".hidden"):
        with pytest.raises(SystemExit):
            parser.parse_args(["--tag", bad])
        assert f"--tag: {bad!r}: use letters, digits, '_', '.' or '-'" in capsys.readouterr().err
    with pytest.raises(argparse.ArgumentTypeError, match="records' file names"):
        record_name("test", 0, "../x")


def test_the_best_validation_variant_becomes_the_care_rows_settings(tmp_path):
    from care.bench.record import BenchmarkRecord, write_record

    scores = {"CARE": {"ndcg_at_10": 0.30}, "CARE [mined]": {"ndcg_at_10": 0.31}, "CARE [lr]": {"ndcg_at_10": 0.29},
              "symmetric large": {"ndcg_at_10": 0.40}}
    write_record(BenchmarkRecord(EXPERIMENT, "validation_seed0", config={
        "variants": {"mined": ["stage2:mine=1", "stage2:mine.range_max=300"], "lr": ["stage2:optim.lr=1e-5"]}},
        seeds=[0], scores=scores), tmp_path)
    chosen = chosen_variant(tmp_path)
    assert chosen.name == "mined" and chosen.mining == {"n_negatives": 1, "range_max": 300}


def test_a_soup_averages_the_named_rows(tmp_path):
    import torch
    from safetensors.torch import load_file, save_file

    def model(name: str, value: float) -> str:
        folder = tmp_path / name / "model"
        folder.mkdir(parents=True)
        save_file({"w": torch.full((2,), value)}, str(folder / "model.safetensors"))
        return f"{folder}?dtype=float32"

    specs = {"CARE": model("care", 0.0), "CARE [a]": model("a", 1.0), "CARE [b]": model("b", 5.0)}
    args = build_parser().parse_args(["--soup", "ab=a,b", "--soup", "all=CARE,a,b"])
    assert args.soup == [("ab", ["a", "b"]), ("all", ["CARE", "a", "b"])]
    averaged = soup(tmp_path / "work", "ab", ["a", "b"], specs)
    assert averaged == tmp_path / "work" / "soups" / "ab"
    assert load_file(str(averaged / "model.safetensors"))["w"].tolist() == [3.0, 3.0]
    with pytest.raises(SystemExit, match="no row CARE \\[c\\]"):
        soup(tmp_path / "work", "ac", ["a", "c"], specs)


def test_a_tagged_probe_gets_its_own_record_name_outside_the_summary():
    assert record_name("validation", 0) == "validation_seed0"
    tagged = record_name("validation", 0, "frozen_doc")
    assert tagged == "validation_frozen_doc_seed0"
    assert not tagged.startswith("validation_seed")  # what summarise and chosen_variant read
    assert build_parser().parse_args(["--tag", "frozen_doc"]).tag == "frozen_doc"


def test_summarise_with_a_tag_reads_only_that_tags_records(tmp_path):
    from care.bench.record import BenchmarkRecord, read_records, write_record

    def seed_record(name: str, seed: int, care: float, large: float) -> None:
        scores = {"symmetric large": {"ndcg_at_10": large}, "symmetric small": {"ndcg_at_10": 0.2},
                  "CARE": {"ndcg_at_10": care}}
        write_record(BenchmarkRecord(EXPERIMENT, record_name("test", seed, name), config={},
                                     seeds=[seed], scores=scores), tmp_path)

    seed_record("", 0, 0.10, 0.30)  # a plain CPU record: must not enter the tagged summary
    seed_record("gpu", 0, 0.28, 0.29)
    seed_record("gpu", 1, 0.30, 0.31)
    peerless = read_records(tmp_path, EXPERIMENT)["test_gpu_seed0"]
    peerless.scores[PEER_ROW] = {"ndcg_at_10": 0.295}  # the peer on seed 0 only
    write_record(peerless, tmp_path)
    args = build_parser().parse_args(["--out", str(tmp_path), "--seeds", "0", "1", "--summarise", "--tag", "gpu"])
    summarise(args)
    summary = read_records(tmp_path, EXPERIMENT)["test_gpu"]
    assert summary.seeds == [0, 1]
    assert summary.scores["CARE"]["per_seed"] == [0.28, 0.30]
    assert summary.extra["checks"]["CARE / symmetric large"] == pytest.approx(0.29 / 0.30)
    assert summary.extra["checks"]["peer - symmetric large"] == pytest.approx(0.295 - 0.29)  # seed 0's pair only
    table = (tmp_path / EXPERIMENT / "test_gpu.md").read_text(encoding="utf-8")
    assert "(gpu records), seeds [0, 1]" in table
    assert "e5 cut to 6 strided layers" in table and summary.config["layers"] == [6]  # records without it: the default
    plain = build_parser().parse_args(["--out", str(tmp_path), "--seeds", "0", "1", "--summarise"])
    summarise(plain)
    assert read_records(tmp_path, EXPERIMENT)["test"].scores["CARE"]["per_seed"] == [0.10]


def test_summary_names_the_query_towers_depth_from_the_records(tmp_path):
    from care.bench.record import BenchmarkRecord, read_records, write_record

    scores = {"symmetric large": {"ndcg_at_10": 0.3}, "CARE": {"ndcg_at_10": 0.25}}
    write_record(BenchmarkRecord(EXPERIMENT, record_name("validation", 0, "L3"), config={"layers": 3},
                                 seeds=[0], scores=scores), tmp_path)
    args = build_parser().parse_args(["--out", str(tmp_path), "--seeds", "0", "--validation", "--summarise",
                                            "--tag", "L3"])
    summarise(args)
    assert read_records(tmp_path, EXPERIMENT)["validation_L3"].config["layers"] == [3]
    table = (tmp_path / EXPERIMENT / "validation_L3.md").read_text(encoding="utf-8")
    assert table.splitlines()[0].endswith("e5 cut to 3 strided layers")


@pytest.mark.slow  # ~20 s: every row trained on tiny towers, then a rerun that trains and encodes nothing
def test_the_driver_trains_and_scores_every_row_and_a_rerun_repeats_nothing(tmp_path):
    import json
    import os
    import subprocess
    import sys

    from tests.bench.tiny_dev_set import write_dev_set

    data = write_dev_set(tmp_path)
    command = [sys.executable, "-m", "benchmarks.bench_real_weights", "--data", str(data), "--e5",
               str(tmp_path / "tiny" / "tiny-bert"), "--work", str(tmp_path / "work"), "--out", str(tmp_path / "out"),
               "--seeds", "0", "--layers", "1", "--max-length", "32", "--threads", "1", "--variant",
               "lr=stage2:optim.lr=1e-5", "--symmetric-variant", "lr", "--soup", "s=CARE,lr", "--extra-layers", "1"]
    root = Path(__file__).resolve().parents[3]

    def run(args: list[str] = command, code: int = 0) -> str:
        done = subprocess.run(args, cwd=root, capture_output=True, text=True, timeout=600,
                              env={**os.environ, "CARE_DEV_SET": ""})
        assert done.returncode == code, done.stderr[-3000:]
        return done.stderr

    run()
    record = json.loads((tmp_path / "out" / EXPERIMENT / "test_seed0.json").read_text(encoding="utf-8"))
    assert set(record["scores"]) == {
        "e5 zero-shot", "symmetric small", "symmetric large", "CARE w/o Stage II", "CARE", PEER_ROW,
        "CARE w/o Stage I", "CARE [lr]", "symmetric large [lr]", "CARE soup [s]", "symmetric small (1 layers)",
        "CARE (1 layers)", "student vs frozen e5", "CARE, ONNX int8", "student vs frozen e5, ONNX int8"}
    work = tmp_path / "work" / "test" / "seed0"
    assert not (work / "variants" / "lr" / "stage1").exists()  # the variant trained Stage II on the CARE row's Stage I
    assert "variants/lr/stage2" in record["extra"]["train_seconds_by_stage"] and "peer" in \
        record["extra"]["train_seconds_by_stage"]
    assert record["config"]["variants"] == {"lr": ["stage2:optim.lr=1e-5"]} and record["config"]["peer"]["max_length"] == 32
    assert "CMedTEB-Demo-Retrieval" in record["extra"]["travel"]
    log = run()  # everything finished and scored: nothing trains, nothing is evaluated
    assert "recipe: running" not in log and "evaluating" not in log
    # a screen of a variant without the CARE row (--skip-rows care): on the finished initialisations only
    screen = [*command[:command.index("--variant")], "--variant", "st1=stage1:optim.lr=1e-5", "--skip-rows", "care",
              "peer", "without_stage1", "--no-student", "--no-int8", "--tag", "screen"]
    run(screen)
    record = json.loads((tmp_path / "out" / EXPERIMENT / "test_screen_seed0.json").read_text(encoding="utf-8"))
    assert set(record["scores"]) == {"e5 zero-shot", "symmetric small", "symmetric large", "CARE [st1]",
                                     "CARE w/o Stage II [st1]"}
    assert (work / "variants" / "st1" / "stage1").is_dir()  # the variant changes Stage I: it trained its own
    # a seed without its initialisations: the screen trains them (and no Stage I or II of the CARE row) first
    fresh = [*screen[:screen.index("--work") + 1], str(tmp_path / "fresh"), *screen[screen.index("--work") + 2:]]
    log = run(fresh)
    assert "training the seed's init_query, init_document first" in log
    recipe = tmp_path / "fresh" / "test" / "seed0" / "care" / "recipe"
    assert sorted(p.name for p in recipe.iterdir() if p.is_dir()) == ["init_document", "init_query"]
