"""The OpenAI-compatible judge against a local server with scripted faults, the reply parser, the
cache and the concurrent runner."""

from __future__ import annotations

import pytest

from care.curate.judges.base import JudgeError, JudgePair
from care.curate.judges.cache import JudgmentCache
from care.curate.judges.config import JudgeConfig, JudgesConfig
from care.curate.judges.embedding_judge import EmbeddingJudge
from care.curate.judges.openai_judge import OpenAIChatJudge
from care.curate.judges.parse import normalise_grade, parse_grades
from care.curate.judges.prompt import JudgePrompt
from care.curate.judges.runner import judge_pairs
from care.errors import CareError
from care.testing.chat_server import hash_grade

QUERY = "头痛三天怎么办"
PASSAGES = ["多喝水，注意休息", "可以口服布洛芬缓解", "建议到神经内科就诊", "饭后散步有助消化"]


def make_judge(server, **overrides) -> OpenAIChatJudge:
    settings = dict(id="j1", base_url=server.base_url, model="m1", timeout_s=0.3, backoff_base_s=0.01,
                    passages_per_call=4, max_concurrency=4)
    settings.update(overrides)
    return OpenAIChatJudge(JudgeConfig(**settings))


def expected(model: str = "m1") -> list[str]:
    return [hash_grade(model, QUERY, p) for p in PASSAGES]


# --- parsing --------------------------------------------------------------------------------------

@pytest.mark.parametrize("reply", [
    '[{"id": 1, "grade": "S"}, {"id": 2, "grade": "d"}]',
    'Here you go:\n```json\n[{"id": 1, "grade": "S级"}, {"id": 2, "grade": "D"}]\n```\nHope this helps.',
    '{"judgments": [{"index": "1", "label": "S"}, {"index": "2", "label": "D"}]} trailing words',
    '{"1": "S", "2": "D"}',
    '[{"id": 1, "grade": "S"}, {"id": 2, "grade": "D"}, {"id": 3, "gra',  # truncated
])
def test_parse_grades_tolerates_real_replies(reply):
    assert parse_grades(reply, 3) == {0: "S", 1: "D"}


def test_parse_grades_ignores_out_of_range_ids_bad_grades_and_prose():
    assert parse_grades('[{"id": 9, "grade": "S"}, {"id": 1, "grade": "Z"}, {"id": 2, "grade": "A"}]', 2) == {1: "A"}
    assert parse_grades("I think passage 1 is S", 2) == {}
    assert normalise_grade("Strong") is None and normalise_grade(" b ") == "B"


def test_prompt_numbers_passages_and_hash_is_stable():
    prompt = JudgePrompt.load()
    messages = prompt.messages(QUERY, ["第一段\n换行", "第二段"])
    user = messages[1]["content"]
    assert "查询：" + QUERY in user and "[1] 第一段 换行" in user and "[2] 第二段" in user and "2 个段落" in user
    assert prompt.hash == JudgePrompt.load().hash and len(prompt.hash) == 16


# --- the judge against the fault-injecting server -------------------------------------------------

def test_judge_grades_match_server(chat_server):
    judge = make_judge(chat_server)
    assert judge.judge(QUERY, PASSAGES) == expected()
    usage = judge.usage()
    assert usage.calls == 1 and usage.prompt_tokens > 0 and usage.completion_tokens > 0


def test_malformed_reply_is_reasked(chat_server):
    chat_server.add_faults("malformed")
    judge = make_judge(chat_server)
    assert judge.judge(QUERY, PASSAGES) == expected()
    assert judge.usage().reasks == 1


def test_missing_passage_is_reasked_alone(chat_server):
    chat_server.add_faults("missing")
    judge = make_judge(chat_server)
    assert judge.judge(QUERY, PASSAGES) == expected()
    second = chat_server.requests[1]
    assert second["passages"] == [PASSAGES[-1]]  # only the missing passage was asked again
    assert sorted(p for _, _, p in chat_server.answered) == sorted(PASSAGES)  # nothing graded twice


def test_timeout_429_and_5xx_are_retried_with_backoff(chat_server):
    chat_server.add_faults("timeout", "429", "500", "503")
    sleeps: list[float] = []
    judge = OpenAIChatJudge(JudgeConfig(id="j1", base_url=chat_server.base_url, model="m1", timeout_s=0.3,
                                        backoff_base_s=0.01, backoff_max_s=1.0), sleep=sleeps.append)
    assert judge.judge(QUERY, PASSAGES) == expected()
    assert judge.usage().retries == 4
    assert sleeps[1] == pytest.approx(chat_server.retry_after_s)  # Retry-After of the 429 honoured
    assert sleeps[0] == pytest.approx(0.01, rel=0.2) and sleeps[2] == pytest.approx(0.04, rel=0.2)  # 2^n backoff


def test_retries_exhausted_raise_judge_error(chat_server):
    chat_server.add_faults("500", "500", "500")
    judge = make_judge(chat_server, max_retries=2)
    with pytest.raises(JudgeError, match="InternalServerError"):
        judge.judge(QUERY, PASSAGES)


def test_missing_api_key_is_a_clear_error(chat_server, monkeypatch):
    monkeypatch.delenv("CARE_TEST_KEY", raising=False)
    with pytest.raises(CareError, match="CARE_TEST_KEY"):
        make_judge(chat_server, api_key_env="CARE_TEST_KEY")


def test_cost_accounting_uses_configured_prices(chat_server):
    judge = make_judge(chat_server, price_input_per_million=2.0, price_output_per_million=8.0)
    judge.judge(QUERY, PASSAGES)
    u = judge.usage()
    assert u.cost_usd == pytest.approx((u.prompt_tokens * 2.0 + u.completion_tokens * 8.0) / 1e6)


# --- runner + cache ----------------------------------------------------------------------------------

def _pairs(n_queries: int = 6, n_docs: int = 7) -> list[JudgePair]:
    return [JudgePair(f"q{i}", f"问题{i}：胃痛怎么办", f"d{k}", f"段落{k}：胃痛可以吃奥美拉唑")
            for i in range(n_queries) for k in range(n_docs)]


def test_runner_with_faults_and_cache_never_pays_twice(chat_server, tmp_path):
    chat_server.add_faults("429", "malformed", "missing", "500")
    judge = make_judge(chat_server, passages_per_call=3)
    pairs = _pairs()
    with JudgmentCache(tmp_path / "c.sqlite") as cache:
        first = judge_pairs(judge, pairs, cache, show_progress=False)
        assert first.judged == len(pairs) and not first.failed
        assert first.grades == {(p.query_id, p.doc_id): hash_grade("m1", p.query, p.passage) for p in pairs}
        n_requests = len(chat_server.requests)
        again = judge_pairs(make_judge(chat_server, passages_per_call=3), pairs, cache, show_progress=False)
        assert again.cached == len(pairs) and again.judged == 0 and again.grades == first.grades
        assert len(chat_server.requests) == n_requests
        total = cache.usage("j1")
        assert total.calls == first.usage.calls and total.prompt_tokens == first.usage.prompt_tokens
    graded = [(q, p) for _, q, p in chat_server.answered]
    assert len(graded) == len(set(graded)) == len(pairs)


def test_runner_reports_failures_and_keeps_finished_work(chat_server, tmp_path):
    judge = make_judge(chat_server, passages_per_call=7, max_retries=0, max_concurrency=1)
    chat_server.add_faults("ok", "500")
    pairs = _pairs(3, 7)
    with JudgmentCache(tmp_path / "c.sqlite") as cache:
        result = judge_pairs(judge, pairs, cache, show_progress=False, raise_on_failure=False)
        assert len(result.failed) == 7 and result.judged == 14
        assert cache.count("j1") == 14
        chat_server.add_faults("500")
        with pytest.raises(JudgeError, match="rerun"):
            judge_pairs(judge, pairs, cache, show_progress=False)
        assert cache.count("j1") == 14
        rerun = judge_pairs(judge, pairs, cache, show_progress=False)
        assert rerun.cached == 14 and rerun.judged == 7


def test_embedding_judge_grades_by_threshold(char_encoder):
    judge = EmbeddingJudge(char_encoder, {"S": 0.99, "A": 0.8, "B": 0.5, "C": 0.3})
    grades = judge.judge("胃痛", ["胃痛", "胃痛怎么办呢", "今天天气很好", "胃"])
    assert grades[0] == "S" and grades[2] == "D"
    sims = char_encoder.encode_documents(["胃痛怎么办呢"]) @ char_encoder.encode_queries(["胃痛"])[0]
    assert grades[1] == judge.grade(float(sims[0]))


def test_judges_config_round_trip_and_errors(tmp_path):
    path = tmp_path / "judges.yaml"
    path.write_text(
        "cache: cache/j.sqlite\n"
        "judges:\n"
        "  - {id: a, base_url: 'http://x/v1', model: m, api_key_env: KEY_A, price_input_per_million: 1.5}\n"
        "  - {id: b, kind: embedding, encoder: e5, thresholds: {S: 0.9}}\n"
        "voting: {positive_grades: [S], negative_grades: [D], scores: {S: 2}}\n", encoding="utf-8")
    config = JudgesConfig.load(path)
    assert config.cache == str(tmp_path / "cache/j.sqlite")
    assert config.judges[0].price_input_per_million == 1.5 and config.judges[1].thresholds == {"S": 0.9}
    assert config.voting.positive_grades == ("S",)
    assert JudgesConfig.from_dict(config.to_dict()).to_dict() == config.to_dict()
    with pytest.raises(CareError, match="unknown field"):
        JudgesConfig.from_dict({"judges": [{"id": "a", "base_url": "u", "model": "m", "modle": "x"}]})
    with pytest.raises(CareError, match="base_url and model"):
        JudgesConfig.from_dict({"judges": [{"id": "a"}]})


# --- partial answers, usage as it happens, clear errors ------------------------------------------------

def test_a_partial_answer_keeps_the_grades_that_came_back(chat_server, tmp_path):
    judge = make_judge(chat_server, max_reasks=1, max_concurrency=1)
    pairs = [JudgePair("q", QUERY, f"d{i}", p) for i, p in enumerate(PASSAGES)]
    chat_server.add_faults("missing", "missing")  # the last passage is left out, and again when re-asked alone
    with pytest.raises(JudgeError) as err:
        judge.judge(QUERY, PASSAGES)
    assert err.value.grades == [*expected()[:-1], None]
    chat_server.add_faults("missing", "missing")
    with JudgmentCache(tmp_path / "c.sqlite") as cache:
        first = judge_pairs(judge, pairs, cache, show_progress=False, raise_on_failure=False)
        assert first.failed == [("q", "d3")] and first.judged == 3 and cache.count("j1") == 3
        asked_before = len(chat_server.requests)
        rerun = judge_pairs(judge, pairs, cache, show_progress=False)
        assert rerun.cached == 3 and rerun.judged == 1
        assert [r["passages"] for r in chat_server.requests[asked_before:]] == [[PASSAGES[-1]]]  # only the missing one
        assert rerun.grades[("q", "d3")] == expected()[-1]


def test_usage_is_on_disk_as_each_request_returns(chat_server, tmp_path):
    judge = make_judge(chat_server, passages_per_call=1, max_concurrency=1, price_input_per_million=1.0)
    pairs = [JudgePair("q", QUERY, f"d{i}", p) for i, p in enumerate(PASSAGES)]
    seen_on_disk: list[tuple[int, int]] = []
    with JudgmentCache(tmp_path / "c.sqlite") as cache:
        real = judge.judge

        def spying(query, passages):  # what a kill -9 right after this reply would leave on disk
            grades = real(query, passages)
            with JudgmentCache(tmp_path / "c.sqlite") as other:
                u = other.usage("j1")
            seen_on_disk.append((u.sent, u.calls))
            return grades

        judge.judge = spying
        chat_server.add_faults("500")
        judge_pairs(judge, pairs, cache, show_progress=False)
        total = cache.usage("j1")
    # the reply of the n-th call is recorded before the call hands its grades back
    assert seen_on_disk == [(2, 1), (3, 2), (4, 3), (5, 4)]  # the first call needed a retry after a 500
    assert total.sent == 5 and total.calls == 4 and total.retries == 1 and total.unrecorded == 0
    assert total.cost_usd == pytest.approx(total.prompt_tokens / 1e6)


def test_refused_connection_names_the_url():
    from care.serve.server import free_port

    url = f"http://127.0.0.1:{free_port()}/v1"  # nothing listens there
    judge = OpenAIChatJudge(JudgeConfig(id="j1", base_url=url, model="m1", max_retries=0, timeout_s=2))
    with pytest.raises(JudgeError, match=f"APIConnectionError.*{url}.*check base_url"):
        judge.judge(QUERY, PASSAGES)
    assert judge.usage().sent == 1 and judge.usage().errors == 1 and judge.usage().unrecorded == 0


@pytest.mark.parametrize(("name", "text", "message"), [
    ("judges.yaml", "judges:\n  - id: a\n    model: [m\n", r"judges.yaml: not valid YAML at line \d+, column \d+"),
    ("judges.json", '{"judges": [{"id": "a",}]}', r"judges.json: not valid JSON at line 1, column \d+"),
    ("judges.yaml", "judges:\n  - {id: a, base_url: 'http://x/v1', model: m, passages_per_call: five}\n",
     r"judges.yaml, judges\[0\] \(id 'a'\), field 'passages_per_call': expected an integer, got 'five'"),
    ("judges.yaml", "judges:\n  - {id: a, base_url: 'http://x/v1', model: m, timeout_s: '60s'}\n",
     r"judges.yaml, judges\[0\] \(id 'a'\), field 'timeout_s': expected a number, got '60s'"),
    ("judges.yaml", "judges:\n  - {id: a, base_url: 'http://x/v1', model: m, modle: x}\n",
     r"judges.yaml, judges\[0\] \(id 'a'\): unknown field\(s\) \['modle'\]"),
    ("judges.yaml", "judges:\n  - {id: a, base_url: 'http://x/v1', model: m}\nvoting: {positive: [S]}\n",
     r"judges.yaml, voting: unknown field\(s\) \['positive'\]"),
    ("judges.yaml", "judges:\n  - {id: a}\n", r"judges.yaml: judge 'a': an openai judge needs base_url and model"),
    ("judges.yaml", "- a\n- b\n", r"judges.yaml: expected a mapping of judges config fields"),
])
def test_judges_config_errors_name_the_file_and_field(tmp_path, name, text, message):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    with pytest.raises(CareError, match=message):
        JudgesConfig.load(path)


def test_cli_prints_a_config_error_as_one_line(tmp_path):
    import subprocess
    import sys

    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text('{"query_id": "q", "query": "头痛", "doc_id": "d", "passage": "休息"}\n', encoding="utf-8")
    config = tmp_path / "judges.yaml"
    config.write_text("judges:\n  - {id: a, base_url: 'http://x/v1', model: m, passages_per_call: five}\n", encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "care.cli", "-q", "curate", "judge", str(pairs), str(tmp_path / "o.jsonl"),
                           "--judges", str(config), "--no-progress"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert done.stderr.strip().startswith("error: ") and "passages_per_call" in done.stderr and str(config) in done.stderr
