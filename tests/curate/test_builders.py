"""build-benchmark, build-train and audit end to end: a tiny corpus, two retrievers, two LLM judges on
the local server that disagree on some pairs, and the CLI."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from care.cli import app
from care.curate.audit import audit_benchmark
from care.curate.benchmark import BenchmarkConfig, build_benchmark
from care.curate.judges.cache import JudgmentCache
from care.curate.judges.config import JudgeConfig
from care.curate.judges.openai_judge import OpenAIChatJudge
from care.curate.train_data import TrainDataConfig, build_train
from care.data.errors import DataFormatError
from care.data.rerank import load_rerank
from care.data.retrieval import load_retrieval_folder
from care.data.training import iter_training_file
from care.errors import CareError
from care.testing.chat_server import FakeChatServer
from care.train.recipes.alignment_data import alignment_from_training_file

from .conftest import CharEncoder

TOPICS = {"q1": "胃痛", "q2": "头痛", "q3": "失眠"}
AMBIGUOUS = "可能"


def grade_fn(model: str, query: str, passage: str) -> str:
    """Judge a: S when the passage names the query's topic; judge b agrees, except on 'maybe' passages (B)."""
    topic = query[:2]
    if topic not in passage:
        return "D" if model == "model-a" else "C"
    if model == "model-b" and AMBIGUOUS in passage:
        return "B"
    return "S" if model == "model-a" else "A"


def _corpus_rows():
    rows = []
    for t, topic in enumerate(TOPICS.values()):
        rows.append({"id": f"{t}-good1", "text": f"{topic}的常见处理方法是休息和对症用药"})
        rows.append({"id": f"{t}-good2", "text": f"{topic}时可以先观察，{topic}加重请就医"})
        rows.append({"id": f"{t}-maybe", "text": f"{topic}{AMBIGUOUS}与饮食有关"})
    rows += [{"id": f"x{i}", "text": t} for i, t in enumerate(["糖尿病饮食控制", "高血压按时服药", "皮肤过敏止痒", "儿童发热护理"])]
    return rows


@pytest.fixture
def world(tmp_path):
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in _corpus_rows()), encoding="utf-8")
    queries = tmp_path / "queries.jsonl"
    queries.write_text("".join(json.dumps({"id": q, "text": f"{t}怎么办"}, ensure_ascii=False) + "\n"
                               for q, t in TOPICS.items()), encoding="utf-8")
    with FakeChatServer(grade_fn) as server:
        judges = [OpenAIChatJudge(JudgeConfig(id=f"judge-{m}", base_url=server.base_url, model=f"model-{m}",
                                              passages_per_call=4, backoff_base_s=0.01)) for m in "ab"]
        yield tmp_path, corpus, queries, judges, server


class OtherCharEncoder(CharEncoder):
    name = "char-test-2"

    @property
    def fingerprint(self) -> str:
        return "char-test-v2"


def test_build_benchmark_unanimous_labels(world):
    tmp, corpus, queries, judges, server = world
    out = tmp / "task"
    with JudgmentCache(tmp / "cache.sqlite") as cache:
        report = build_benchmark(corpus, queries, [CharEncoder(), OtherCharEncoder()], judges, out, cache=cache,
                                 config=BenchmarkConfig(depth=6, rerank_negatives=2), show_progress=False)
        data = load_retrieval_folder(out)
        for t, qid in enumerate(TOPICS):
            positives = {d for d, s in data.qrels[qid].items() if s > 0}
            assert positives <= {f"{t}-good1", f"{t}-good2"} and positives  # the 'maybe' doc is discarded
            assert f"{t}-maybe" not in data.qrels[qid]
            assert all(s == 2 for d, s in data.qrels[qid].items() if s > 0)  # min(S=3, A=2)
        assert len(data.corpus) == len(_corpus_rows())
        rerank = load_rerank(out / "rerank.jsonl")
        assert rerank and all(len(r.negative) <= 2 and all(r.query[:2] not in n for n in r.negative) for r in rerank)
        assert report["discarded_disagreement"] >= 1 and report["positives"] >= 3
        assert set(report["agreement"]["cohen_kappa"]) == {"judge-a|judge-b"}
        assert json.loads((out / "label_report.json").read_text())["judges"] == ["judge-a", "judge-b"]
        n = len(server.answered)
        build_benchmark(corpus, queries, [CharEncoder(), OtherCharEncoder()], judges, tmp / "task2", cache=cache,
                        config=BenchmarkConfig(depth=6, rerank_negatives=2), show_progress=False)
        assert len(server.answered) == n  # the rebuild is fully cached
        assert (tmp / "task2" / "qrels.tsv").read_text() == (out / "qrels.tsv").read_text()


def test_build_train_never_uses_a_relevant_document_as_negative(world):
    tmp, corpus, queries, judges, _ = world
    out = tmp / "train.jsonl"
    stats = build_train(corpus, queries, CharEncoder(), judges, out, config=TrainDataConfig(depth=8, chunk_queries=2),
                        show_progress=False)
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert stats["rows"] == len(rows) == 3
    for row in rows:
        topic = row["query"][:2]
        assert row["pos"] and all(topic in p and AMBIGUOUS not in p for p in row["pos"])
        assert all(topic not in n for n in row["neg"])  # no judged-relevant or ambiguous document as negative
    examples = list(iter_training_file(out))
    assert len(examples) == 3
    n = alignment_from_training_file(out, tmp / "align.jsonl")
    align = [json.loads(line) for line in (tmp / "align.jsonl").read_text(encoding="utf-8").splitlines()]
    assert n == len(align) and {r["type"] for r in align} == {"query_align", "doc_align"}
    assert all(r["pos"] == [r["query"]] and r["query"] not in r["neg"] for r in align)
    extra = ["布洛芬可以缓解头痛", "多喝水注意休息"]
    n_extra = alignment_from_training_file(out, tmp / "align2.jsonl", extra_queries=extra)
    align2 = [json.loads(line) for line in (tmp / "align2.jsonl").read_text(encoding="utf-8").splitlines()]
    assert n_extra == n + 2
    assert {r["query"] for r in align2 if r["type"] == "query_align"} >= set(extra)


def test_audit_finds_unlabelled_relevant_documents(world):
    tmp, corpus, queries, judges, _ = world
    task = tmp / "task"
    task.mkdir()
    (task / "corpus.jsonl").write_text(corpus.read_text(encoding="utf-8"), encoding="utf-8")
    (task / "queries.jsonl").write_text(queries.read_text(encoding="utf-8"), encoding="utf-8")
    (task / "qrels.tsv").write_text("query-id\tcorpus-id\tscore\n" + "".join(f"{q}\t{t}-good1\t1\n" for t, q in enumerate(TOPICS)))
    report = audit_benchmark(task, CharEncoder(), judges, tmp / "audit", top_k=5, show_progress=False)
    rows = [json.loads(line) for line in (tmp / "audit" / "false_negatives.jsonl").read_text(encoding="utf-8").splitlines()]
    found = {(r["query_id"], fn["doc_id"]) for r in rows for fn in r["false_negatives"]}
    assert found == {(q, f"{t}-good2") for t, q in enumerate(TOPICS)}
    assert report["likely_false_negatives"] == 3 and report["queries_with_false_negatives"] == 3
    assert report["examples"][0]["gold"] and report["examples"][0]["false_negative"]
    # task.json counts only grade 2 relevant: the grade-1 documents are not gold, so the judges see them again
    (task / "task.json").write_text(json.dumps({"name": "t", "type": "retrieval", "relevance_threshold": 2}), encoding="utf-8")
    graded = audit_benchmark(task, CharEncoder(), judges, tmp / "audit2", top_k=5, show_progress=False)
    assert graded["relevance_threshold"] == 2 and graded["pairs_judged"] == report["pairs_judged"] + 3
    rows = [json.loads(line) for line in (tmp / "audit2" / "false_negatives.jsonl").read_text(encoding="utf-8").splitlines()]
    assert all(not r["gold"] for r in rows)
    assert {(r["query_id"], fn["doc_id"]) for r in rows for fn in r["false_negatives"]} >= found


def test_cli_anonymise_and_judge(tmp_path):
    src = tmp_path / "in.jsonl"
    src.write_text(json.dumps({"id": 1, "text": "患者王建国，电话13812345678"}, ensure_ascii=False) + "\n", encoding="utf-8")
    runner = CliRunner()
    result = runner.invoke(app, ["curate", "anonymise", str(src), str(tmp_path / "out.jsonl"), "--no-progress"])
    assert result.exit_code == 0, result.output
    assert json.loads((tmp_path / "out.jsonl").read_text(encoding="utf-8"))["text"] == "患者[NAME]，电话[PHONE]"
    assert json.loads(result.output)["removed"] == {"NAME": 1, "PHONE": 1}

    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text(json.dumps({"query_id": "q", "query": "胃痛怎么办", "doc_id": "d", "passage": "胃痛要休息"},
                                ensure_ascii=False) + "\n", encoding="utf-8")
    with FakeChatServer(grade_fn) as server:
        config = tmp_path / "judges.yaml"
        config.write_text(f"cache: c.sqlite\njudges:\n  - {{id: a, base_url: '{server.base_url}', model: model-a}}\n",
                          encoding="utf-8")
        result = runner.invoke(app, ["curate", "judge", str(pairs), str(tmp_path / "j.jsonl"), "-j", str(config), "--no-progress"])
    assert result.exit_code == 0, result.output
    row = json.loads((tmp_path / "j.jsonl").read_text(encoding="utf-8"))
    assert row == {"query_id": "q", "doc_id": "d", "grades": {"a": "S"}, "label": "positive", "score": 3}


def test_cli_build_train_with_alignment_sentences(world):
    tmp, corpus, queries, _, server = world
    config = tmp / "judges.yaml"
    config.write_text(f"cache: c.sqlite\njudges:\n  - {{id: a, base_url: '{server.base_url}', model: model-a}}\n",
                      encoding="utf-8")
    result = CliRunner().invoke(app, ["curate", "build-train", "--corpus", str(corpus), "--queries", str(queries),
                                      "-r", "bm25", "-j", str(config), "-o", str(tmp / "train.jsonl"), "--depth", "8",
                                      "--alignment-out", str(tmp / "align.jsonl"), "--alignment-sentences", "2",
                                      "--no-progress"])
    assert result.exit_code == 0, result.output
    stats = json.loads(result.output)
    assert stats["alignment_sentences"] == 2
    align = [json.loads(line) for line in (tmp / "align.jsonl").read_text(encoding="utf-8").splitlines()]
    corpus_texts = {r["text"] for r in _corpus_rows()}
    queries_side = [r["query"] for r in align if r["type"] == "query_align"]
    # the training queries plus two sentences cut from corpus passages (split at "，" is not a sentence end)
    assert len(queries_side) == len(set(queries_side)) == 3 + 2
    assert sum(q in corpus_texts for q in queries_side) == 2


@pytest.mark.parametrize("builder", ["benchmark", "train"])
def test_a_corpus_with_a_repeated_id_is_refused_before_any_work(world, builder):
    tmp, corpus, queries, judges, server = world
    rows = _corpus_rows()
    rows.insert(5, {"id": rows[1]["id"], "text": "另一段文字"})  # line 6 repeats line 2's id
    corpus.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    with pytest.raises(DataFormatError, match=r"corpus.jsonl, line 6, field 'id': duplicate id '0-good2' \(first seen on line 2\)"):
        if builder == "benchmark":
            build_benchmark(corpus, queries, [CharEncoder()], judges, tmp / "bench", show_progress=False)
        else:
            build_train(corpus, queries, CharEncoder(), judges, tmp / "train.jsonl", show_progress=False)
    assert not server.requests  # nothing was judged (or paid) before the refusal
    assert not (tmp / "bench" / "work").exists() and not (tmp / "train.jsonl.work").exists()


def unrelated_query(folder):
    """A queries file whose one question none of the world's documents answers (no judge votes positive)."""
    path = folder / "unrelated.jsonl"
    path.write_text(json.dumps({"id": "1", "text": "骨折怎么办"}, ensure_ascii=False) + "\n", encoding="utf-8")
    return path


def test_build_benchmark_without_positives_writes_the_report_its_error_names(world):
    """The error sent the user to label_report.json, which was never written."""
    tmp, corpus, _, judges, _ = world
    queries = unrelated_query(tmp)
    out = tmp / "task"
    with pytest.raises(CareError, match="label_report.json") as error:
        build_benchmark(corpus, queries, [CharEncoder()], judges, out, config=BenchmarkConfig(depth=3),
                        show_progress=False)
    assert str(out / "label_report.json") in str(error.value) and "--depth" in str(error.value)
    report = json.loads((out / "label_report.json").read_text(encoding="utf-8"))
    assert report["queries_with_positive"] == 0 and report["pooled_pairs"] == 3


def test_build_benchmark_without_negatives_writes_no_empty_rerank_file(world):
    """Every pooled candidate a positive: an empty rerank.jsonl was written, which every reader refuses."""
    tmp, corpus, queries, judges, _ = world
    out = tmp / "task"
    report = build_benchmark(corpus, queries, [CharEncoder()], judges, out, config=BenchmarkConfig(depth=1),
                             show_progress=False)
    assert report["rerank_queries"] == 0 and report["negatives"] == 0
    assert not (out / "rerank.jsonl").exists()
    assert load_retrieval_folder(out).qrels


def test_build_train_without_positives_leaves_no_empty_training_file(world):
    tmp, corpus, _, judges, _ = world
    queries = unrelated_query(tmp)
    out = tmp / "train.jsonl"
    with pytest.raises(CareError, match="wrote no rows") as error:
        build_train(corpus, queries, CharEncoder(), judges, out, config=TrainDataConfig(depth=3), show_progress=False)
    assert "train.jsonl.report.json" in str(error.value) and "--depth" in str(error.value)
    assert not out.exists() and not (tmp / "train.jsonl.partial").exists()
    assert json.loads((tmp / "train.jsonl.report.json").read_text(encoding="utf-8"))["skipped_no_positive"] == 1


@pytest.mark.parametrize("make", [
    lambda: BenchmarkConfig(depth=0), lambda: BenchmarkConfig(depth=-3), lambda: BenchmarkConfig(rerank_negatives=-2),
    lambda: TrainDataConfig(depth=0), lambda: TrainDataConfig(max_negatives=-1), lambda: TrainDataConfig(chunk_queries=0),
])
def test_builder_settings_that_would_silently_do_nothing_or_crash_are_refused(make):
    """--max-negatives -1 dropped each row's last negative (neg[:-1]); --rerank-negatives -2 was an
    'unexpected ValueError' from random.sample; --depth 0 judged nothing."""
    with pytest.raises(CareError, match="must be"):
        make()


def test_audit_refuses_top_k_zero(world):
    tmp, _, _, judges, server = world
    with pytest.raises(CareError, match="--top-k must be at least 1"):
        audit_benchmark(tmp / "no-task", CharEncoder(), judges, tmp / "audit", top_k=0, show_progress=False)
    assert not server.requests and not (tmp / "audit").exists()


def _crash_on_second_chunk(monkeypatch):
    """build-train's labelling fails on its second chunk of queries (a killed run after one checkpoint)."""
    from care.curate import train_data

    real, calls = train_data.label_pairs, {"n": 0}

    def failing(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 2:
            raise KeyboardInterrupt("simulated crash")
        return real(*args, **kwargs)

    monkeypatch.setattr(train_data, "label_pairs", failing)
    return real


def test_build_train_resume_refuses_judges_with_other_thresholds_or_edited_queries(world, monkeypatch):
    """The checkpoint kept judge ids only, so a resume with other thresholds mixed two labellings in one file;
    and an input edited between runs went unnoticed."""
    from care.curate import train_data
    from care.curate.judges.embedding_judge import EmbeddingJudge

    tmp, corpus, queries, _, _ = world
    out, config = tmp / "train.jsonl", TrainDataConfig(depth=3, chunk_queries=1)
    judge = EmbeddingJudge(CharEncoder(), {"S": 0.9, "A": 0.5}, judge_id="emb")
    real = _crash_on_second_chunk(monkeypatch)
    with pytest.raises(KeyboardInterrupt):
        build_train(corpus, queries, CharEncoder(), [judge], out, config=config, show_progress=False)
    monkeypatch.setattr(train_data, "label_pairs", real)
    stricter = EmbeddingJudge(CharEncoder(), {"S": 0.95, "A": 0.6}, judge_id="emb")
    with pytest.raises(CareError, match="different settings"):
        build_train(corpus, queries, CharEncoder(), [stricter], out, config=config, show_progress=False)
    queries.write_text(queries.read_text(encoding="utf-8").replace("胃痛怎么办", "胃痛吃什么"), encoding="utf-8")
    with pytest.raises(CareError, match=r"queries\.jsonl changed since the interrupted run"):
        build_train(corpus, queries, CharEncoder(), [judge], out, config=config, show_progress=False)


def test_a_query_that_shows_nothing_is_never_sent_to_the_judges(world):
    """A zero-width query was pooled and graded by every judge (a paid LLM judge charged for an empty text)."""
    tmp, corpus, queries, judges, server = world
    with queries.open("a", encoding="utf-8") as fh:
        fh.write(json.dumps({"id": "q9", "text": "\u200b\u200b"}) + "\n")
    report = build_benchmark(corpus, queries, [CharEncoder()], judges, tmp / "task", config=BenchmarkConfig(depth=3),
                             show_progress=False)
    assert report["blank_pairs_not_judged"] == 3 and report["pairs_labelled"] == 9
    assert len(server.requests) == 2 * 3  # one call per judge for each of the three visible queries
    assert "q9" not in load_retrieval_folder(tmp / "task").qrels
    stats = build_train(corpus, queries, CharEncoder(), judges, tmp / "train.jsonl",
                        config=TrainDataConfig(depth=3, keep_without_positive=True), show_progress=False)
    assert stats["blank_pairs_not_judged"] == 3
    assert "\u200b\u200b" not in [row.query for row in iter_training_file(tmp / "train.jsonl")]


@pytest.mark.parametrize("field", ["query", "passage"])
def test_curate_judge_refuses_a_pair_that_shows_nothing(tmp_path, field):
    from care.curate.judges.labelling import read_pairs

    row = {"query_id": "q", "query": "胃痛怎么办", "doc_id": "d", "passage": "胃痛要休息", field: "\u200b \ufeff"}
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text(json.dumps({"query_id": "q0", "query": "头痛", "doc_id": "d0", "passage": "头痛休息"}) + "\n"
                     + json.dumps(row) + "\n", encoding="utf-8")
    with pytest.raises(DataFormatError, match=rf"pairs\.jsonl.*line 2.*{field}"):
        read_pairs(pairs)
