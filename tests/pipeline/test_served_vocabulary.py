"""``recipes.care.prune_query_vocabulary``: under a query budget ``train_care`` serves CARE with its query tower cut to
the run's vocabulary only when the validation split says the cut keeps quality — a probe cut of the texts minus the
validation split, scored against the uncut model on it — and records the decision; ``true`` always cuts, ``false``
never; the tolerance is a checked config field."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from care.config import ConfigError
from care.pipeline.cli import demo_config_path
from care.pipeline.config import CareRecipeConfig, RunConfig, load_run_config
from care.pipeline.query_budget import OUTPUT_KEY as BUDGET_KEY
from care.pipeline.served_vocabulary import OUTPUT_KEY, report_lines

from .budget_run import E5_TOWERS, FOREIGN_WORDS, budget_context

#: A character of the tiny tower's vocabulary (one of :data:`FOREIGN_WORDS`) that only one validation query is given.
MARK = "犇"
#: Enough held-out rows of the demo's training file for a validation split (the safety net's tests' share).
SHARE = "validation.share=0.15"
#: A tolerance no probe can miss: the cut is served whatever it scores.
ANY_SCORE = "recipes.care.prune_tolerance=1"


def validated_context(tmp_path: Path, *more: str):
    """:func:`budget_context` with a validation split carved as the label step carves it (``label/all.jsonl`` every
    row, ``label/validation/``, ``label/train.jsonl`` the rest); the first validation query ends in :data:`MARK`,
    in every file that holds it."""
    from care.pipeline.sources import corpus_file
    from care.train.recipes.validation import carve_validation

    ctx = budget_context(tmp_path, 5, SHARE, *more)
    split = carve_validation(ctx.train_file, corpus_file(ctx), ctx.validation_dir, ctx.config.validation,
                             seed=ctx.config.seed)
    assert split is not None
    queries_file = split.task_dir / "queries.jsonl"
    queries = [json.loads(line) for line in queries_file.read_text(encoding="utf-8").splitlines()]
    marked = queries[0]["text"]
    queries[0]["text"] = marked + MARK
    queries_file.write_text("".join(json.dumps(q, ensure_ascii=False) + "\n" for q in queries), encoding="utf-8")
    rows = [json.loads(line) for line in ctx.train_file.read_text(encoding="utf-8").splitlines()]
    for row in rows:
        row["query"] = marked + MARK if row["query"] == marked else row["query"]
    assert sum(row["query"] == marked + MARK for row in rows) >= 1
    ctx.labelled_file.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    ctx.train_file.write_text(split.train_file.read_text(encoding="utf-8"), encoding="utf-8")
    assert marked + MARK not in ctx.train_file.read_text(encoding="utf-8")
    return ctx


def _vocabulary(folder: Path) -> set[str]:
    data = json.loads((folder / "query_0_Transformer" / "tokenizer.json").read_text(encoding="utf-8"))
    return set(data["model"]["vocab"])


def _document_entries(ctx) -> int:
    """Entries of the run's embedding cache that hold document vectors."""
    from care.pipeline.context import EMBEDDINGS_CACHE

    manifests = [json.loads(p.read_text(encoding="utf-8")) for p in ctx.cache_dir(EMBEDDINGS_CACHE).rglob("manifest.json")]
    return sum(m.get("role") == "document" for m in manifests)


def test_the_budget_serves_care_with_its_query_tower_cut_to_the_runs_vocabulary(tmp_path, curve, trained_care) -> None:
    """``care run``'s ``train_care`` under a budget, the cut kept on validation: CARE's row becomes
    ``models/care/served/``, its query route cut to the pieces of the corpus and the labelled texts (with the query
    prefix it was trained with), its document route the trained one byte for byte; the training queries encode as
    before, unseen test queries still encode; the check scored both on validation with the same document vectors."""
    from care.data.retrieval import load_queries
    from care.encoders.sides import load_side
    from care.pipeline.run import STEPS
    from care.pipeline.sources import corpus_file

    ctx = validated_context(tmp_path, ANY_SCORE)
    outputs = STEPS["train_care"](ctx)
    served_dir = (ctx.root / "models" / "care" / "served").resolve()
    spec, cut = outputs["models"]["CARE"], outputs[OUTPUT_KEY]
    assert spec.startswith(f"{served_dir}?query_prefix=query%3A+") and cut["model"] == spec and cut["served"]
    assert cut["full_vocabulary_model"].startswith(f"{trained_care}?query_prefix=query%3A+")
    assert outputs[BUDGET_KEY]["depth"] == 1  # the budget's pick, recorded beside the cut
    assert cut["vocabulary_files"] == [str(corpus_file(ctx)), str(ctx.labelled_file)]  # no evaluation task's queries
    assert cut["module"] == "query_0_Transformer" and cut["vocab_after"] < cut["vocab_before"]
    assert cut["weights_bytes_after"] < cut["weights_bytes_before"] and cut["parameters_after"] < cut["parameters_before"]
    assert not {"zebra", "quokka", "龘"} & _vocabulary(served_dir)
    for path in (trained_care / "document_0_Transformer").iterdir():  # the index's document vectors do not move
        assert (served_dir / "document_0_Transformer" / path.name).read_bytes() == path.read_bytes()
    queries = [json.loads(line)["query"] for line in ctx.train_file.read_text(encoding="utf-8").splitlines()[:20]]
    full, served = load_side(cut["full_vocabulary_model"], "query"), load_side(spec, "query")
    cosines = (full.encode_queries(queries) * served.encode_queries(queries)).sum(axis=1)
    np.testing.assert_allclose(cosines, 1.0, atol=1e-6)
    test_queries = list(load_queries(Path(corpus_file(ctx)).parent / "queries.jsonl").values())[:50]
    assert np.isfinite(served.encode_queries([*test_queries, *FOREIGN_WORDS])).all()
    # the check: real scores on validation, the probe gone, the documents encoded once for both
    scores = cut["validation"]
    assert cut["selected_on"] == "validation" and cut["tolerance"] == 1 and cut["keeps_quality"]
    assert 0 <= scores["probe"] <= 1 and 0 < scores["uncut"] <= 1
    assert scores["delta"] == round(scores["probe"] - scores["uncut"], 4)
    kept = json.loads((ctx.root / "models" / "care" / "served_check" / "scores.json").read_text(encoding="utf-8"))
    assert {k: v["scores"]["ndcg_at_10"] for k, v in kept["models"].items()} == {"uncut": scores["uncut"],
                                                                              "probe cut": scores["probe"]}
    assert not (ctx.root / "models" / "care" / "served_check" / "probe").exists()
    assert _document_entries(ctx) == 1
    line = "\n".join(report_lines(cut))
    assert f"keeps {cut['vocab_after']:,} of {cut['vocab_before']:,} token rows" in line
    assert f"{scores['probe']:.4f} nDCG@10 on validation against {scores['uncut']:.4f} uncut" in line


def test_the_probe_cut_leaves_out_the_validation_split_and_the_served_cut_keeps_it(tmp_path, monkeypatch, curve,
                                                                                   trained_care) -> None:
    """The piece only a validation query uses is in the served vocabulary (every labelled row chooses it) and not in
    the probe's (the validation queries are unseen text to it, as test queries are to the served cut)."""
    from care.models import vocab_prune
    from care.pipeline.run import STEPS

    real, vocabularies = vocab_prune.prune_vocabulary, {}

    def spy(source, texts, output, **options):
        result = real(source, texts, output, **options)
        vocabularies[Path(output).name] = _vocabulary(Path(output))
        return result

    monkeypatch.setattr(vocab_prune, "prune_vocabulary", spy)
    ctx = validated_context(tmp_path, ANY_SCORE)
    outputs = STEPS["train_care"](ctx)
    assert MARK in _vocabulary(trained_care)
    assert set(vocabularies) == {"probe", "served"}
    assert MARK not in vocabularies["probe"] and MARK in vocabularies["served"]
    assert vocabularies["probe"] < vocabularies["served"]
    assert outputs[OUTPUT_KEY]["probe_vocab_after"] == len(vocabularies["probe"]) < outputs[OUTPUT_KEY]["vocab_after"]


UNCUT = 0.5


@pytest.mark.parametrize(("probe", "setting", "served"), [(0.4980, "null", True), (0.4970, "null", True),
                                                         (0.4960, "null", False), (0.4960, "true", True)])
def test_the_cut_is_served_only_when_validation_keeps_it(tmp_path, monkeypatch, caplog, curve, trained_care, probe,
                                                         setting, served) -> None:
    """Scores arranged on validation (uncut 0.5): a probe within ``prune_tolerance`` (0.003, the boundary included)
    serves the cut; one below it serves the full vocabulary and the manifest's record says why; ``true`` cuts anyway,
    with a warning and both scores."""
    from care.pipeline.run import STEPS
    from care.train.recipes.validation import StageValidator

    def evaluate(self, spec):
        return {"ndcg_at_10": probe if Path(spec.split("?")[0]).name == "probe" else UNCUT, "recall_at_100": 1.0}

    monkeypatch.setattr(StageValidator, "_evaluate", evaluate)
    ctx = validated_context(tmp_path, f"recipes.care.prune_query_vocabulary={setting}")
    with caplog.at_level("WARNING", logger="care.pipeline.served_vocabulary"):
        outputs = STEPS["train_care"](ctx)
    record, served_dir = outputs[OUTPUT_KEY], ctx.root / "models" / "care" / "served"
    keeps = probe >= UNCUT - 0.003
    assert record["served"] is served and record["keeps_quality"] is keeps
    assert record["selected_on"] == "validation" and record["tolerance"] == 0.003 and record["metric"] == "ndcg_at_10"
    assert record["validation"] == {"uncut": UNCUT, "probe": probe, "delta": round(probe - UNCUT, 4)}
    assert outputs["models"]["CARE"] == (record["model"] if served else record["full_vocabulary_model"])
    assert outputs["models"]["CARE"].startswith(f"{served_dir.resolve() if served else trained_care}?")
    assert served_dir.is_dir() is served
    assert (f"{probe:.4f} nDCG@10 on validation against 0.5000 uncut ({probe - UNCUT:+.4f}, tolerance 0.003)"
            in record["decision"])
    warned = [r.getMessage() for r in caplog.records
              if r.levelname == "WARNING" and r.name == "care.pipeline.served_vocabulary"]
    assert bool(warned) is not keeps and all(record["decision"] in w for w in warned)
    line = "\n".join(report_lines(record))
    assert record["decision"] in line
    assert line.startswith("Served query tower cut" if served else "Query tower not cut")


@pytest.mark.parametrize(("setting", "served"), [("null", False), ("true", True)])
def test_without_a_validation_split_only_an_asked_cut_is_served(tmp_path, curve, trained_care, setting,
                                                                served) -> None:
    """No validation split (validation off, or too few held-out queries): nothing says the cut keeps quality, so the
    default serves the full vocabulary and says so; ``true`` cuts it unchecked."""
    from care.pipeline.run import STEPS

    ctx = budget_context(tmp_path, 5, f"recipes.care.prune_query_vocabulary={setting}")
    outputs = STEPS["train_care"](ctx)
    record = outputs[OUTPUT_KEY]
    assert record["served"] is served and record["selected_on"] is None and "no validation split" in record["decision"]
    assert outputs["models"]["CARE"].startswith(str(ctx.root / "models" / "care" / "served") if served
                                                else str(trained_care))
    assert not (ctx.root / "models" / "care" / "served_check").exists()


def test_false_never_cuts_nor_checks(tmp_path, monkeypatch, curve, trained_care) -> None:
    from care.pipeline.run import STEPS

    monkeypatch.setattr("care.pipeline.served_vocabulary.check_on_validation", lambda *a: pytest.fail("checked"))
    ctx = validated_context(tmp_path, "recipes.care.prune_query_vocabulary=false")
    outputs = STEPS["train_care"](ctx)
    assert OUTPUT_KEY not in outputs and outputs["models"]["CARE"].startswith(str(trained_care))


def test_a_resumed_run_reads_the_decision_back_and_does_not_check_again(tmp_path, monkeypatch, curve,
                                                                         trained_care) -> None:
    """The decision is ``train_care``'s output in ``manifest.json``: a rerun of the finished step skips it."""
    from care.pipeline import served_vocabulary
    from care.pipeline.run import run_pipeline

    real, checks = served_vocabulary.check_on_validation, []
    monkeypatch.setattr(served_vocabulary, "check_on_validation", lambda *a: checks.append(a) or real(*a))
    config = load_run_config(demo_config_path(tiny=True), [
        *E5_TOWERS, "recipes.care.query_speedup=5", "inputs.raw_queries=null", SHARE, ANY_SCORE,
        "steps=[label, train_care]"])
    first = run_pipeline(config, tmp_path / "run")
    second = run_pipeline(config, tmp_path / "run")
    assert "train_care" in first.steps_run and "train_care" in second.steps_skipped and len(checks) == 1
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text(encoding="utf-8"))
    record = manifest["steps"]["train_care"]["outputs"][OUTPUT_KEY]
    assert record["served"] and record["selected_on"] == "validation" and set(record["validation"]) == {
        "uncut", "probe", "delta"}


@pytest.mark.parametrize("bad", ["-0.001", "nan"])
def test_the_tolerance_is_a_checked_field_that_round_trips(bad) -> None:
    import yaml

    with pytest.raises(ConfigError, match="recipes.care.prune_tolerance': must be >= 0"):
        load_run_config(demo_config_path(tiny=True), [f"recipes.care.prune_tolerance={bad}"])
    with pytest.raises(ConfigError, match="recipes.care.prune_tolerance"):
        CareRecipeConfig(prune_tolerance=float(bad))
    assert load_run_config(demo_config_path(tiny=True)).recipes.care.prune_tolerance == 0.003  # issue 58's target
    config = load_run_config(demo_config_path(tiny=True), ["recipes.care.prune_tolerance=0.01"])
    again = RunConfig.from_dict(yaml.safe_load(yaml.safe_dump(config.to_dict())))
    assert again.recipes.care.prune_tolerance == 0.01 and again == config


@pytest.mark.parametrize(("budget", "setting", "cut"), [(None, None, False), (5, None, True), (5, False, False),
                                                        (None, True, True)])
def test_the_vocabulary_cut_is_on_by_default_exactly_under_a_budget(budget, setting, cut) -> None:
    from care.pipeline.served_vocabulary import prune_enabled

    recipe = CareRecipeConfig(query_speedup=budget, prune_query_vocabulary=setting)
    assert prune_enabled(recipe) is cut
    overrides = [*E5_TOWERS, f"recipes.care.query_speedup={'null' if budget is None else budget}",
                 f"recipes.care.prune_query_vocabulary={'null' if setting is None else str(setting).lower()}"]
    assert prune_enabled(load_run_config(demo_config_path(tiny=True), overrides).recipes.care) is cut


@pytest.mark.parametrize("setting", [None, True])
def test_a_static_query_tower_is_served_as_trained_and_an_asked_cut_is_refused(tmp_path, setting) -> None:
    """A budget that picks depth 0 (or ``models.query: e5?layers=0``) ends with a static lookup tower as CARE's query
    route: the default (``null``) serves it as trained; ``prune_query_vocabulary: true`` names the field."""
    from sentence_transformers.sentence_transformer.modules import StaticEmbedding

    from care.pipeline.served_vocabulary import serve_query_cut

    folder = tmp_path / "static"
    folder.mkdir()
    (folder / "modules.json").write_text(json.dumps([{"idx": 0, "name": "0", "path": "",
                                                      "type": f"{StaticEmbedding.__module__}.StaticEmbedding"}]),
                                         encoding="utf-8")
    ctx = budget_context(tmp_path, 5, f"recipes.care.prune_query_vocabulary={'null' if setting is None else 'true'}")
    models = {"CARE": f"{folder}?query_prefix=query%3A+"}
    if setting is None:
        assert serve_query_cut(ctx, models) is None and models["CARE"].startswith(str(folder))
    else:
        with pytest.raises(ConfigError, match="recipes.care.prune_query_vocabulary: .*static lookup tower"):
            serve_query_cut(ctx, models)
