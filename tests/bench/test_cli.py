"""``care bench`` through typer's test runner, with fake models standing in for load_model."""

import json

import pytest
import typer
from typer.testing import CliRunner

import care.bench.cli as bench_cli
from care.errors import CareError

from .fakes import HashEncoder, OverlapRetriever


@pytest.fixture
def app(monkeypatch):
    models = {"hash": HashEncoder, "bm25": OverlapRetriever, "e5": lambda: HashEncoder(name="e5")}
    loaded = []

    def fake_load(spec, device, batch_size):
        loaded.append((spec, device, batch_size))
        return models[spec]()

    monkeypatch.setattr(bench_cli, "_load", fake_load)
    app = typer.Typer()
    bench_cli.register(app)

    @app.command("noop")
    def _noop() -> None:  # a second command keeps typer in multi-command mode
        pass

    app.loaded = loaded
    return app


def test_bench_models_and_tasks_write_results(app, retrieval_folder, sts_folder, tmp_path):
    out = tmp_path / "out"
    result = CliRunner().invoke(app, [
        "bench", "--model", "hash", "--model", "bm25", "--task", str(retrieval_folder), "--task", str(sts_folder),
        "--output", str(out), "--cache-dir", str(tmp_path / "c"), "--batch-size", "4", "--no-progress", "--device", "cpu",
    ])
    assert result.exit_code == 0, result.output
    assert "| tiny-retrieval | retrieval | ndcg_at_10 |" in result.output
    assert len(list(out.glob("*.json"))) == 4 and (out / "results.md").is_file()
    assert app.loaded == [("hash", "cpu", 4), ("bm25", "cpu", 4)]
    saved = json.loads((out / "hash__tiny-retrieval.json").read_text(encoding="utf-8"))
    assert saved["settings"]["index"]["type"] == "flat" and saved["settings"]["batch_size"] == 4
    assert list((tmp_path / "c").rglob("manifest.json")), "embeddings were cached"


def test_bench_without_arguments_runs_reference_models_on_demo(app, monkeypatch, retrieval_folder, rerank_folder):
    monkeypatch.setattr(bench_cli, "_DEFAULT_TASKS", [lambda: [retrieval_folder, rerank_folder]])
    result = CliRunner().invoke(app, ["bench", "--no-progress", "--no-cache"])
    assert result.exit_code == 0, result.output
    assert [spec for spec, _, _ in app.loaded] == ["bm25", "e5"]
    assert "| task | type | metric | overlap | e5 |" in result.output
    assert "| tiny-rerank | rerank | map_at_10 |" in result.output


def test_the_care_command_runs_the_demo_tasks_by_default():
    import care.cli  # noqa: F401 — registers care bench with the demo's task folders
    from care.demo import DEMO_TASK_NAMES, demo_task_folders

    assert [p.name for p in bench_cli._default_task_folders()] == sorted(DEMO_TASK_NAMES)
    assert bench_cli._default_task_folders() == demo_task_folders()


def test_bench_index_and_split_options(app, retrieval_folder, tmp_path):
    (retrieval_folder / "test_queries.jsonl").write_text('{"id": "q1", "text": "高血压吃什么药"}\n', encoding="utf-8")
    (retrieval_folder / "test_qrels.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\n", encoding="utf-8")
    out = tmp_path / "o"
    result = CliRunner().invoke(app, ["bench", "-m", "hash", "-t", str(retrieval_folder), "--split", "test", "--index", "hnsw",
                                      "--ef-search", "32", "--no-cache", "--no-progress", "-o", str(out)])
    assert result.exit_code == 0, result.output
    saved = json.loads((out / "hash__tiny-retrieval.json").read_text(encoding="utf-8"))
    assert saved["split"] == "test" and saved["stats"]["n_queries"] == 1
    assert saved["settings"]["index"]["type"] == "hnsw" and saved["settings"]["index"]["ef_search"] == 32


def test_models_with_the_same_name_are_labelled_by_spec(app, monkeypatch, sts_folder, tmp_path):
    monkeypatch.setattr(bench_cli, "_load", lambda spec, device, batch_size: HashEncoder(dim=int(spec.split("=")[1])))
    out = tmp_path / "o"
    result = CliRunner().invoke(app, ["bench", "-m", "hash?dim=32", "-m", "hash?dim=64", "-t", str(sts_folder), "--no-cache", "--no-progress", "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in out.glob("*.json")) == ["hash_dim_32__tiny-sts.json", "hash_dim_64__tiny-sts.json"]


def test_unknown_task_is_a_care_error(app):
    result = CliRunner().invoke(app, ["bench", "-m", "hash", "-t", "CMedTEB-Retreival"])
    assert isinstance(result.exception, CareError) and "Did you mean" in str(result.exception)


def test_registered_in_top_level_cli():
    from care.cli import COMMAND_MODULES

    assert "care.bench.cli" in COMMAND_MODULES


def _beir_folder(root):
    """A folder exactly as BEIR publishes one: _id, title, text, metadata; qrels/<split>.tsv with a header."""
    folder = root / "beir-mini"
    (folder / "qrels").mkdir(parents=True)
    docs = [{"_id": "d1", "title": "高血压", "text": "高血压患者应该低盐饮食并按时服药", "metadata": {}},
            {"_id": "d2", "title": "糖尿病", "text": "糖尿病需要控制血糖和饮食", "metadata": {"url": "x"}},
            {"_id": "d3", "title": "感冒发烧多喝水注意休息", "text": ""}]  # BEIR has title-only documents
    (folder / "corpus.jsonl").write_text("".join(json.dumps(d, ensure_ascii=False) + "\n" for d in docs), encoding="utf-8")
    queries = [{"_id": "q1", "text": "高血压吃什么药", "metadata": {}}, {"_id": "q2", "text": "糖尿病饮食", "metadata": {}},
               {"_id": "q3", "text": "发烧怎么办", "metadata": {}}]
    (folder / "queries.jsonl").write_text("".join(json.dumps(q, ensure_ascii=False) + "\n" for q in queries), encoding="utf-8")
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\nq3\td3\t1\n", encoding="utf-8")
    (folder / "qrels" / "train.tsv").write_text("query-id\tcorpus-id\tscore\nq2\td2\t1\n", encoding="utf-8")
    return folder


@pytest.mark.parametrize("split", [None, "test", "train"])
def test_a_beir_folder_loads_as_published(app, tmp_path, split):
    folder = _beir_folder(tmp_path)
    out = tmp_path / "o"
    args = ["bench", "-m", "hash", "-t", str(folder), "--no-cache", "--no-progress", "-o", str(out)]
    result = CliRunner().invoke(app, args + (["--split", split] if split else []))
    assert result.exit_code == 0, result.output
    saved = json.loads((out / "hash__beir-mini.json").read_text(encoding="utf-8"))
    assert saved["split"] == (split or "test")  # without --split, BEIR's evaluation split, recorded
    assert saved["stats"]["n_queries"] == (1 if split == "train" else 2)


@pytest.mark.parametrize("kind", ["retrieval", "beir", "rerank"])
def test_a_split_the_folder_does_not_have_is_refused(app, tmp_path, retrieval_folder, rerank_folder, kind):
    folder = {"retrieval": retrieval_folder, "beir": _beir_folder(tmp_path), "rerank": rerank_folder}[kind]
    out = tmp_path / "o"
    result = CliRunner().invoke(app, ["bench", "-m", "hash", "-t", str(folder), "--split", "dev", "--no-cache",
                                      "--no-progress", "-o", str(out)])
    assert isinstance(result.exception, CareError), result.output
    message = str(result.exception)
    assert "'dev'" in message and ("splits are: test, train" if kind == "beir" else "only the default") in message
    assert app.loaded == []  # refused before any model was loaded
    assert not list(out.glob("*.json"))


def test_output_that_is_a_file_is_a_clear_error(app, retrieval_folder, tmp_path):
    target = tmp_path / "results.json"
    target.write_text("{}", encoding="utf-8")
    result = CliRunner().invoke(app, ["bench", "-m", "hash", "-t", str(retrieval_folder), "--no-cache", "-o", str(target)])
    assert isinstance(result.exception, CareError)
    assert "is an existing file, not a folder" in str(result.exception) and app.loaded == []
    assert target.read_text(encoding="utf-8") == "{}"


def test_a_failing_task_still_leaves_results_md_for_the_finished_ones(app, retrieval_folder, sts_folder, tmp_path):
    broken = tmp_path / "broken-sts"
    broken.mkdir()
    (broken / "sts.jsonl").write_text('{"sentence1": "头痛", "sentence2": "头疼", "score": 1}\n{"sentence1": \n',
                                      encoding="utf-8")
    out = tmp_path / "o"
    result = CliRunner().invoke(app, ["bench", "-m", "hash", "-t", str(retrieval_folder), "-t", str(broken),
                                      "--no-cache", "--no-progress", "-o", str(out)])
    assert result.exit_code != 0 and "line 2" in str(result.exception)
    table = (out / "results.md").read_text(encoding="utf-8")
    assert "| tiny-retrieval | retrieval | ndcg_at_10 |" in table and "broken-sts" not in table


def test_bench_latency_times_dense_models_and_bm25_search_with_a_self_check(app, retrieval_folder, sts_folder, tmp_path,
                                                                           monkeypatch):
    import care.bench.latency as latency

    fast = latency.LatencySettings(warmup_calls=1, min_calls=6, max_calls=12, max_seconds=5.0, overhead_calls=2)
    monkeypatch.setattr(latency, "LatencySettings", lambda: fast)
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["bench", "--model", "hash", "--model", "bm25", "--task", str(retrieval_folder),
                                      "--output", str(out), "--no-cache", "--no-progress", "--latency"])
    assert result.exit_code == 0, result.output
    timings = result.output.split("query latency")[-1]
    assert "| hash |" in timings and "| hash (copy) |" in timings and "| overlap |" in timings  # searching the corpus
    # the real clock on a shared machine: the self-check may pass or fail, but its line and record are always there
    saved = json.loads((out / "latency.json").read_text(encoding="utf-8"))
    assert ("latency self-check passed" if saved["self_check"]["passed"] else "LATENCY SELF-CHECK FAILED") in result.output
    assert saved["self_check"]["model"] == "hash" and set(saved["models"]) == {"hash", "hash (copy)", "overlap"}
    assert saved["models"]["overlap"]["engine"] == "OverlapRetriever"
    assert [spec for spec, _, _ in app.loaded].count("hash") == 2  # the self-check's second copy


def test_bench_latency_times_bm25_on_the_first_retrieval_task_and_says_when_there_is_none(app, sts_folder,
                                                                                          retrieval_folder, monkeypatch):
    import care.bench.latency as latency

    fast = latency.LatencySettings(warmup_calls=1, min_calls=6, max_calls=12, max_seconds=5.0, overhead_calls=2)
    monkeypatch.setattr(latency, "LatencySettings", lambda: fast)
    result = CliRunner().invoke(app, ["bench", "--model", "bm25", "--task", str(sts_folder), "--no-cache",
                                      "--no-progress", "--latency"])
    assert result.exit_code == 0, result.output
    assert "not timed: overlap" in result.output and "no task here is a retrieval task" in result.output
    result = CliRunner().invoke(app, ["bench", "--model", "bm25", "--model", "hash", "--task", str(sts_folder), "--task",
                                      str(retrieval_folder), "--no-cache", "--no-progress", "--latency"])
    assert result.exit_code == 0, result.output
    timings = result.output.split("query latency on tiny-retrieval's queries:")[-1]
    assert "| overlap |" in timings and "| overlap (copy) |" in timings and "| hash |" in timings
    assert "not timed" not in result.output
