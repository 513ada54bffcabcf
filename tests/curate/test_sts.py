"""build-sts against the local chat server: generation, the paper's checks, re-asks and the cache."""

from __future__ import annotations

import json

import pytest

from care.curate.judges.config import JudgeConfig
from care.curate.judges.openai_judge import ChatClient
from care.curate.sts import StsConfig, build_sts, check_generation, find_term, load_synonyms
from care.data.errors import DataFormatError
from care.data.sts import load_sts
from care.testing.chat_server import FakeChatServer


def _reply(model, messages):
    user = messages[-1]["content"]
    query = user.split("原始问题：", 1)[1].split("\n", 1)[0]
    term = user.split("医学术语“", 1)[1].split("”", 1)[0]
    synonym = user.split("同义词“", 1)[1].split("”", 1)[0]
    if "坏" in query:  # a model that forgets to swap
        return json.dumps({"positive": query, "hard_negative": query, "easy_negative": query}, ensure_ascii=False)
    swapped = query.replace(term, synonym)
    return "好的：\n" + json.dumps({
        "positive": swapped,
        "hard_negative": swapped.replace("怎么治疗", "有什么症状"),
        "easy_negative": query.replace("怎么治疗", "有什么症状"),
    }, ensure_ascii=False)


@pytest.fixture
def inputs(tmp_path):
    queries = tmp_path / "queries.jsonl"
    rows = [("q1", "心梗怎么治疗"), ("q2", "高血压怎么治疗"), ("q3", "今天天气好"), ("q4", "坏心梗怎么治疗")]
    queries.write_text("".join(json.dumps({"id": i, "text": t}, ensure_ascii=False) + "\n" for i, t in rows), encoding="utf-8")
    synonyms = tmp_path / "synonyms.txt"
    synonyms.write_text("# 同义词\n心梗\t心肌梗死\n高血压，原发性高血压\n", encoding="utf-8")
    return queries, synonyms


def test_build_sts_writes_checked_pairs_and_caches(tmp_path, inputs):
    queries, synonyms = inputs
    with FakeChatServer(reply_fn=_reply) as server:
        llm = JudgeConfig(id="gen", base_url=server.base_url, model="m", backoff_base_s=0.01)
        server.add_faults("429")
        out = tmp_path / "sts.jsonl"
        report = build_sts(queries, synonyms, llm, out, config=StsConfig(concurrency=2), show_progress=False)
        pairs = load_sts(out)
        assert report["queries_ok"] == 2 and report["queries_failed"] == 1 and report["queries_without_term"] == 1
        assert report["no_swap_positive"] == 2  # the broken query was asked twice, failed twice
        assert {(p.sentence1, p.sentence2, p.score) for p in pairs} >= {
            ("心梗怎么治疗", "心肌梗死怎么治疗", 1.0), ("心梗怎么治疗", "心肌梗死有什么症状", 0.0),
            ("心梗怎么治疗", "心梗有什么症状", 0.0)}
        assert len(pairs) == 6
        n = len(server.requests)
        again = build_sts(queries, synonyms, ChatClient(llm), tmp_path / "sts2.jsonl",
                          cache_path=tmp_path / "sts.jsonl.cache.sqlite", show_progress=False)
        assert len(server.requests) == n and again["usage"]["calls"] == 0  # all from the cache
        assert (tmp_path / "sts2.jsonl").read_text(encoding="utf-8") == out.read_text(encoding="utf-8")


def test_checks_follow_the_paper():
    q, term, syn = "心梗怎么治疗", "心梗", "心肌梗死"
    good = {"positive": "心肌梗死怎么治疗", "hard_negative": "心肌梗死的病因", "easy_negative": "心梗有什么症状"}
    assert check_generation(q, term, syn, good, 0.3) is None
    assert check_generation(q, term, syn, {**good, "positive": "心梗怎么治疗呢"}, 0.3) == "no_swap_positive"
    assert check_generation(q, term, syn, {**good, "hard_negative": "心肌梗死患者出院后应该如何进行长期的康复训练"}, 0.3) == "length_hard_negative"
    assert check_generation(q, term, syn, {**good, "easy_negative": "心肌梗死的症状"}, 0.3) == "swapped_easy_negative"
    assert check_generation(q, term, syn, {"positive": "x"}, 0.3) == "missing_hard_negative"


def test_synonym_dictionary(tmp_path):
    path = tmp_path / "syn.txt"
    path.write_text("心梗\t心肌梗死\t心肌梗塞\n胃炎\n", encoding="utf-8")
    with pytest.raises(DataFormatError, match="line 2"):
        load_synonyms(path)
    path.write_text("心梗\t心肌梗死\t心肌梗塞\n", encoding="utf-8")
    groups = load_synonyms(path)
    assert groups["心梗"] == ["心肌梗死", "心肌梗塞"] and groups["心肌梗塞"] == ["心梗", "心肌梗死"]
    assert find_term("急性心肌梗死怎么办", groups) == "心肌梗死"
    assert find_term("感冒", groups) is None
