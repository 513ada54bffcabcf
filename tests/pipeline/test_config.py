"""The run config: paths resolved (next to the file, demo:, $VARS), the student recipe file folded in, bad
fields named with the file, steps that have no work left out."""

from __future__ import annotations

import json

import pytest

from care.config import ConfigError
from care.demo import demo_tasks_root
from care.pipeline.cli import demo_config_path
from care.pipeline.config import STEPS, RunConfig, load_run_config


def test_the_shipped_demo_config_resolves_into_the_demo_data():
    config = load_run_config(demo_config_path(tiny=True))
    root = demo_tasks_root()
    assert config.inputs.train_file == str(root / "train" / "train.jsonl")
    assert config.inputs.tasks[0] == str(root / "CMedTEB-Demo-Retrieval") and config.main_task == config.inputs.tasks[0]
    assert config.recipes.student.enabled and config.recipes.student.settings.layers == 6
    assert config.selected_steps == [s for s in STEPS if s != "train_baselines"]
    assert RunConfig.from_dict(config.to_dict()) == config


def test_paths_are_read_next_to_the_file_and_vars_expand(tmp_path, monkeypatch):
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "train.jsonl").write_text('{"query": "q", "pos": ["p"]}\n', encoding="utf-8")
    (tmp_path / "student.yaml").write_text("layers: 4\nstage1: {epochs: 1}\n", encoding="utf-8")
    monkeypatch.setenv("MY_TASKS", str(tmp_path / "tasks"))
    path = tmp_path / "run.yaml"
    path.write_text("inputs: {train_file: data/train.jsonl, tasks: [$MY_TASKS/a, CMedTEB-Retrieval]}\n"
                    "recipes:\n  care: {enabled: false}\n"
                    "  student: {enabled: true, config: student.yaml, settings: {keep: first}}\n", encoding="utf-8")
    config = load_run_config(path)
    assert config.inputs.train_file == str(tmp_path / "data" / "train.jsonl")
    assert config.inputs.tasks == [f"{tmp_path}/tasks/a", "CMedTEB-Retrieval"]  # a registered name stays a name
    student = config.recipes.student.settings
    assert (student.layers, student.keep, student.stage1.epochs) == (4, "first", 1)  # the file, settings win
    assert config.selected_steps == ["label", "train_student", "evaluate", "latency", "index", "report"]
    assert load_run_config(path, ["steps=[label, evaluate]"]).selected_steps == ["label", "evaluate"]


@pytest.mark.parametrize(("text", "message"), [
    ("inputs: {train_file: t.jsonl, tasks: [x]}\nrecipes: {student: {settings: {layers: six}}}\n",
     r"run.yaml: config field 'recipes.student.settings.layers': expected an integer, got 'six'"),
    ("inputs: {train_file: t.jsonl, tasks: [x]}\nmodels: {querry: tiny}\n", r"run.yaml: unknown field 'models.querry'"),
    ("inputs: {train_file: t.jsonl}\n", r"run.yaml: config field 'inputs.tasks': name at least one evaluation task"),
    ("inputs: {tasks: [x]}\n", r"run.yaml: config field 'inputs': give raw_queries .* or a train_file"),
    ("inputs: {train_file: t.jsonl, tasks: [x]}\nsteps: [train]\n", r"unknown step\(s\) \['train'\]"),
])
def test_bad_configs_name_the_field_and_the_file(tmp_path, text, message):
    path = tmp_path / "run.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError, match=message):
        load_run_config(path)


def test_care_recipe_fields_left_out_keep_the_stage_files_settings(tmp_path):
    """A run on e5 towers that sets no recipe fields trains with the e5 preset's own settings (its
    epochs, lr, lengths and e5's ``query: `` prompt); the demo's tiny values come from demo.yaml."""
    from types import SimpleNamespace

    from care.models.instructions import RETRIEVAL_INSTRUCTION, prompt_prefix
    from care.pipeline.train import care_settings

    demo = {(s.stage, s.key): s.value for s in care_settings(
        SimpleNamespace(config=load_run_config(demo_config_path(tiny=True)), recipe_settings=()))}
    expected = {(None, "optim.epochs"): 5, (None, "optim.lr"): 0.001, (None, "optim.batch_size"): 32,
                (None, "model.query_max_seq_length"): 64, ("init_query", "data.n_negatives"): 1,
                ("stage2", "data.n_negatives"): 3}
    assert {key: demo.get(key) for key in expected} == expected  # typed: ints stay ints
    assert type(demo[None, "optim.epochs"]) is int and type(demo[None, "optim.lr"]) is float
    assert prompt_prefix(RETRIEVAL_INSTRUCTION) in demo[None, "model.query_prompt"]
    (tmp_path / "train.jsonl").write_text('{"query": "q", "pos": ["p"]}\n', encoding="utf-8")
    (tmp_path / "run.yaml").write_text("inputs: {train_file: train.jsonl, tasks: [CMedTEB-Retrieval]}\n"
                                       "models: {query: /m/e5-L6, document: /m/e5-L12}\n", encoding="utf-8")
    own = care_settings(SimpleNamespace(config=load_run_config(tmp_path / "run.yaml"), recipe_settings=()))
    assert not [s for s in own if s.key in
                ("optim.epochs", "optim.lr", "optim.batch_size", "model.query_max_seq_length",
                 "model.document_max_seq_length", "checkpoint.every_steps", "model.query_prompt", "data.n_negatives")]


def test_checkpoint_cadence_reaches_every_stage(tmp_path):
    """recipes.care.checkpoint_every / checkpoint_minutes become every stage's checkpoint settings."""
    from types import SimpleNamespace

    from care.pipeline.train import care_settings

    (tmp_path / "run.yaml").write_text(
        "inputs: {train_file: train.jsonl, tasks: [CMedTEB-Retrieval]}\n"
        "models: {query: /m/e5-L6, document: /m/e5-L12}\n"
        "recipes: {care: {checkpoint_every: 40, checkpoint_minutes: 2.5}}\n", encoding="utf-8")
    own = care_settings(SimpleNamespace(config=load_run_config(tmp_path / "run.yaml"), recipe_settings=()))
    assert {(s.key, s.value) for s in own if s.stage is None} >= {("checkpoint.every_steps", 40),
                                                                   ("checkpoint.every_minutes", 2.5)}


def test_alignment_sentences_join_stage1s_query_side(tmp_path):
    """recipes.care.alignment_sentences: the run's corpus sentences become query-side alignment rows (and
    so the ranking part's queries); unset, the recipe builds its own alignment from the training file."""
    from types import SimpleNamespace

    from care.data.io import write_jsonl
    from care.pipeline.train import care_alignment_file

    write_jsonl(tmp_path / "train.jsonl", [{"query": "头痛怎么办", "pos": ["头痛可以休息。多喝水有帮助。"]},
                                           {"query": "发烧吃什么药", "pos": ["发烧可以吃布洛芬。注意补液。"]}])
    write_jsonl(tmp_path / "corpus.jsonl", [{"id": "d1", "text": "感冒时要多休息。咳嗽可以喝止咳糖浆。"},
                                            {"id": "d2", "text": "腹泻时注意补充电解质。饮食要清淡。"}])
    (tmp_path / "run.yaml").write_text("inputs: {train_file: train.jsonl, tasks: [CMedTEB-Retrieval], "
                                       "corpus: corpus.jsonl}\nrecipes: {care: {alignment_sentences: 2}}\n",
                                       encoding="utf-8")
    config = load_run_config(tmp_path / "run.yaml")
    target = care_alignment_file(SimpleNamespace(config=config), str(tmp_path / "train.jsonl"), tmp_path / "care")
    rows = [json.loads(line) for line in open(target, encoding="utf-8")]
    query_side = [r["query"] for r in rows if r["type"] == "query_align"]
    assert query_side[:2] == ["头痛怎么办", "发烧吃什么药"] and len(query_side) == 4  # + 2 corpus sentences
    corpus_sentences = {"感冒时要多休息", "咳嗽可以喝止咳糖浆", "腹泻时注意补充电解质", "饮食要清淡"}
    assert set(query_side[2:]) <= corpus_sentences
    off = load_run_config(tmp_path / "run.yaml", ["recipes.care.alignment_sentences=null"])
    assert care_alignment_file(SimpleNamespace(config=off), str(tmp_path / "train.jsonl"), tmp_path / "x") is None
    # alignment_sentence_max_chars: only sentences of 6 to 7 characters join (感冒时要多休息 has 7, 饮食要清淡 5)
    short = load_run_config(tmp_path / "run.yaml", ["recipes.care.alignment_sentences=10",
                                                    "recipes.care.alignment_sentence_max_chars=7"])
    target = care_alignment_file(SimpleNamespace(config=short), str(tmp_path / "train.jsonl"), tmp_path / "short")
    rows = [json.loads(line) for line in open(target, encoding="utf-8")]
    assert {r["query"] for r in rows if r["type"] == "query_align"} - {"头痛怎么办", "发烧吃什么药"} == {"感冒时要多休息"}


def test_alignment_queries_join_stage1s_query_side_before_corpus_sentences(tmp_path):
    """inputs.alignment_queries: unlabelled questions (resolved next to the config) become query-side alignment
    rows after the training queries and before the corpus sentences; a training query repeated there is kept once."""
    from types import SimpleNamespace

    from care.data.io import write_jsonl
    from care.pipeline.train import care_alignment_file

    write_jsonl(tmp_path / "train.jsonl", [{"query": "头痛怎么办", "pos": ["头痛可以休息。多喝水有帮助。"]}])
    write_jsonl(tmp_path / "corpus.jsonl", [{"id": "d1", "text": "感冒时要多休息。咳嗽可以喝止咳糖浆。"}])
    (tmp_path / "logs").mkdir()
    write_jsonl(tmp_path / "logs" / "search.jsonl", [{"_id": "s1", "text": "宝宝十个月没长牙怎么办"},
                                                     {"_id": "s2", "text": "头痛怎么办"},
                                                     {"_id": "s3", "text": "孩子左下腹部疼"}])
    (tmp_path / "run.yaml").write_text("inputs: {train_file: train.jsonl, tasks: [CMedTEB-Retrieval], corpus: "
                                       "corpus.jsonl, alignment_queries: [logs/search.jsonl]}\n", encoding="utf-8")
    config = load_run_config(tmp_path / "run.yaml")
    assert config.inputs.alignment_queries == [str(tmp_path / "logs" / "search.jsonl")]
    assert RunConfig.from_dict(config.to_dict()) == config
    target = care_alignment_file(SimpleNamespace(config=config), str(tmp_path / "train.jsonl"), tmp_path / "care")
    rows = [json.loads(line) for line in open(target, encoding="utf-8")]
    assert [r["query"] for r in rows if r["type"] == "query_align"] == ["头痛怎么办", "宝宝十个月没长牙怎么办", "孩子左下腹部疼"]
    both = load_run_config(tmp_path / "run.yaml", ["recipes.care.alignment_sentences=5"])
    target = care_alignment_file(SimpleNamespace(config=both), str(tmp_path / "train.jsonl"), tmp_path / "both")
    query_side = [json.loads(line)["query"] for line in open(target, encoding="utf-8")
                  if json.loads(line)["type"] == "query_align"]
    assert query_side[:3] == ["头痛怎么办", "宝宝十个月没长牙怎么办", "孩子左下腹部疼"]
    assert set(query_side[3:]) == {"感冒时要多休息", "咳嗽可以喝止咳糖浆"}


def test_mining_settings_are_checked_when_the_config_loads(tmp_path):
    (tmp_path / "train.jsonl").write_text('{"query": "q", "pos": ["p"]}\n', encoding="utf-8")
    base = "inputs: {train_file: train.jsonl, tasks: [CMedTEB-Retrieval]}\n"
    (tmp_path / "run.yaml").write_text(base + "recipes: {care: {mine_negatives: {n_negatives: 1, "
                                              "relative_margin: 0.02, range_max: 300}}}\n", encoding="utf-8")
    config = load_run_config(tmp_path / "run.yaml")
    assert config.recipes.care.mine_negatives == {"n_negatives": 1, "relative_margin": 0.02, "range_max": 300}
    assert RunConfig.from_dict(config.to_dict()) == config
    (tmp_path / "off.yaml").write_text(base + "recipes: {care: {mine_negatives: {n_negatives: 0}}}\n", encoding="utf-8")
    assert load_run_config(tmp_path / "off.yaml").recipes.care.mine_negatives == {"n_negatives": 0}  # never mine
    for bad, named in (("{n_negatives: -1}", "n_negatives"), ("{n_negatives: 1, margin: 0.1}", "margin"),
                       ("{n_negatives: 1, relative_margin: 2}", "relative_margin")):
        (tmp_path / "bad.yaml").write_text(base + f"recipes: {{care: {{mine_negatives: {bad}}}}}\n", encoding="utf-8")
        with pytest.raises(ConfigError, match=f"bad.yaml.*recipes.care.mine_negatives.*{named}"):
            load_run_config(tmp_path / "bad.yaml")


def test_care_recipe_mines_stage2_negatives_from_the_runs_corpus(tmp_path, monkeypatch):
    from types import SimpleNamespace

    from care.pipeline import train as pipeline_train

    calls = []
    monkeypatch.setattr("care.train.recipes.recipe.run_recipe",
                        lambda plan: calls.append((plan.paths, plan.recipe))
                        or {s: SimpleNamespace(query_model="q", document_model="d", care_model="m", global_step=1,
                                               final_loss=0.0, output_dir=str(tmp_path / s))
                            for s in ("init_query", "init_document", "stage1", "stage2")})
    (tmp_path / "train.jsonl").write_text('{"query": "q", "pos": ["p"]}\n', encoding="utf-8")
    (tmp_path / "corpus.jsonl").write_text('{"id": "d1", "text": "p"}\n', encoding="utf-8")
    mining = {"n_negatives": 1, "relative_margin": 0.02}
    config = RunConfig.from_dict({"inputs": {"train_file": str(tmp_path / "train.jsonl"), "tasks": ["CMedTEB-Retrieval"],
                                             "corpus": str(tmp_path / "corpus.jsonl")},
                                  "models": {"query": "q0", "document": "d0"},
                                  "recipes": {"care": {"mine_negatives": mining, "ablations": {
                                      "CARE w/o Stage I": {"skip_stage1": True},
                                      "CARE, 3 negatives": {"mine_negatives": {"n_negatives": 3}}}}}})
    ctx = SimpleNamespace(config=config, recipe_settings=(), train_file=tmp_path / "train.jsonl", require=lambda value, step: value,
                          model_dir=lambda *parts: tmp_path.joinpath("models", *parts), validation_task=None,
                          cache_dir=lambda *parts: tmp_path.joinpath("cache", *parts))
    pipeline_train.step_train_care(ctx)
    (paths, recipe), (_, without_stage1), (_, three) = calls
    assert recipe.mine_negatives == mining and paths.corpus_file == str(tmp_path / "corpus.jsonl")
    assert without_stage1.skip_stage1 and without_stage1.mine_negatives == mining  # inherits the recipe's mining
    assert three.mine_negatives == {"n_negatives": 3}


def test_a_bad_tower_spec_fails_when_the_config_loads():
    with pytest.raises(ConfigError, match=r"config field 'models.query': tower spec 'e5\?layerz=6': unknown option "
                                          r"'layerz'; accepted options: layers"):
        load_run_config(demo_config_path(tiny=True), ["models.query=e5?layerz=6"])
    assert load_run_config(demo_config_path(tiny=True), ["models.query=e5?layers=6", "models.document=e5"]).models.query == \
        "e5?layers=6"


def test_validation_checks_name_stage_one_as_the_evaluation_does():
    """With a ranking part, Stage I's row (``CARE w/o Stage II``) is the ranking part's model, as the evaluation
    scores it; the alignment before it keeps its own name. Without one, the labels are the recipe's."""
    from care.pipeline.train import STAGE1_ALIGNMENT_LABEL, check_labels

    labels = {"init_query": "symmetric small", "stage1": "CARE w/o Stage II", "stage2": "CARE"}
    ranked = check_labels(["init_query", "stage1", "stage1_rank", "stage2"], labels)
    assert ranked["stage1_rank"] == "CARE w/o Stage II" and ranked["stage1"] == STAGE1_ALIGNMENT_LABEL
    assert check_labels(["init_query", "stage1", "stage2"], labels) == labels
    assert labels["stage1"] == "CARE w/o Stage II"  # the caller's mapping is left as it was


def test_a_negative_thread_count_in_the_file_names_the_field_and_the_file(tmp_path):
    path = tmp_path / "run.yaml"
    path.write_text("inputs: {train_file: t.jsonl, tasks: [x]}\nthreads: -2\n", encoding="utf-8")
    with pytest.raises(ConfigError) as error:
        load_run_config(path)
    assert str(error.value) == (f"{path}: config field 'threads': must be >= 0 (torch threads; 0: the library "
                                "default), got -2")  # from the file: no override named
    assert load_run_config(path, ["threads=4"]).threads == 4


def test_a_bad_recipe_override_is_refused_when_the_config_loads_and_flags_arrive_typed():
    """``recipes.care.overrides`` items are read as stage settings at load, naming the item and the form; a
    command's typed ``(key, value)`` override keeps its type and is named by key when it is refused."""
    with pytest.raises(ConfigError, match=r"recipes.care.overrides': item 'oops': expected KEY=VALUE or STAGE:KEY=VALUE"):
        load_run_config(demo_config_path(tiny=True), ["recipes.care.overrides=[oops]"])
    config = load_run_config(demo_config_path(tiny=True), [("seed", 4), ("recipes.care.epochs", 2),
                                                           ("models.references", {"BM25": "bm25"})])
    assert (config.seed, config.recipes.care.epochs, config.models.references) == (4, 2, {"BM25": "bm25"})
    with pytest.raises(ConfigError, match=r"got -1 \(set by the override threads \(set to -1\)\)"):
        load_run_config(demo_config_path(tiny=True), [("threads", -1)])


def test_a_cache_shared_by_runs_holds_stage1s_teacher_vectors(tmp_path):
    """``cache_dir`` set (seeds sharing one cache): the teacher vectors of Stage I (and of Stage II, where it trains
    the query side alone against the frozen teacher) go there too, so the seeds encode the same texts once; without
    it each run keeps its own."""
    from care.pipeline.context import RunContext
    from care.pipeline.train import TEACHER_CACHE, care_settings

    (tmp_path / "run.yaml").write_text("inputs: {train_file: train.jsonl, tasks: [CMedTEB-Retrieval]}\n"
                                       "models: {query: /m/e5-L6, document: /m/e5-L12}\n", encoding="utf-8")
    shared = tmp_path / "shared"
    for cache, expected in ((None, set()), (str(shared), {(stage, str(shared / TEACHER_CACHE))
                                                          for stage in ("stage1", "stage1_rank", "stage2")})):
        config = load_run_config(tmp_path / "run.yaml", [("cache_dir", cache)] if cache else [])
        settings = care_settings(RunContext(config, tmp_path / "run"))
        assert {(s.stage, s.value) for s in settings if s.key == "model.teacher.cache_dir"} == expected


def test_a_static_query_tower_aligns_on_every_corpus_sentence_by_default(tmp_path):
    """A static query tower (``e5?layers=0``): with ``alignment_sentences`` unset Stage I's query side takes every short
    corpus sentence after the training queries, query-side rows only (the screen's choice); off with
    ``static_tower.corpus_sentences: false``; a transformer query tower keeps the recipe's own alignment."""
    from types import SimpleNamespace

    from care.data.io import write_jsonl
    from care.pipeline.train import care_alignment_file

    write_jsonl(tmp_path / "train.jsonl", [{"query": "头痛怎么办", "pos": ["头痛可以休息。多喝水有帮助。"]},
                                           {"query": "发烧吃什么药", "pos": ["发烧可以吃布洛芬。注意补液。"]}])
    write_jsonl(tmp_path / "corpus.jsonl", [{"id": "d1", "text": "感冒时要多休息。咳嗽可以喝止咳糖浆。"},
                                            {"id": "d2", "text": "腹泻时注意补充电解质。饮食清淡为主。"}])
    (tmp_path / "run.yaml").write_text("inputs: {train_file: train.jsonl, tasks: [CMedTEB-Retrieval], "
                                       "corpus: corpus.jsonl}\n", encoding="utf-8")
    train = str(tmp_path / "train.jsonl")
    config = load_run_config(tmp_path / "run.yaml")
    rows = [json.loads(line) for line in
            open(care_alignment_file(SimpleNamespace(config=config), train, tmp_path / "s", static=True), encoding="utf-8")]
    assert {r["type"] for r in rows} == {"query_align"}
    assert [r["query"] for r in rows][:2] == ["头痛怎么办", "发烧吃什么药"] and {r["query"] for r in rows[2:]} == {
        "感冒时要多休息", "咳嗽可以喝止咳糖浆", "腹泻时注意补充电解质", "饮食清淡为主"}
    assert care_alignment_file(SimpleNamespace(config=config), train, tmp_path / "t") is None
    off = load_run_config(tmp_path / "run.yaml", ["recipes.care.static_tower.corpus_sentences=false"])
    assert care_alignment_file(SimpleNamespace(config=off), train, tmp_path / "o", static=True) is None
    capped = load_run_config(tmp_path / "run.yaml", ["recipes.care.alignment_sentences=1"])
    rows = [json.loads(line) for line in
            open(care_alignment_file(SimpleNamespace(config=capped), train, tmp_path / "c", static=True), encoding="utf-8")]
    assert sum(r["type"] == "query_align" for r in rows) == 3 and any(r["type"] == "doc_align" for r in rows)
