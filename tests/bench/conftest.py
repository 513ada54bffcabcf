"""Tiny task folders for the harness tests; every test gets its own cache and no data root."""

from __future__ import annotations

from pathlib import Path

import pytest

from care.data.rerank import RerankExample, write_rerank
from care.data.retrieval import Document, write_retrieval_folder
from care.data.sts import STSPair, write_sts

CORPUS = [
    Document("d1", "高血压患者应该低盐饮食并按时服药"),
    Document("d2", "糖尿病需要控制血糖和饮食"),
    Document("d3", "感冒发烧多喝水注意休息"),
    Document("d4", "胃痛可能是胃炎引起的"),
    Document("d5", "头痛失眠可以做头部按摩"),
]
QUERIES = {"q1": "高血压吃什么药", "q2": "糖尿病饮食", "q3": "发烧怎么办"}
QRELS = {"q1": {"d1": 1}, "q2": {"d2": 2, "d4": 0}, "q3": {"d3": 1}}


@pytest.fixture
def retrieval_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "tiny-retrieval"
    write_retrieval_folder(folder, CORPUS, QUERIES, QRELS)
    return folder


@pytest.fixture
def rerank_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "tiny-rerank"
    write_rerank(folder / "rerank.jsonl", [
        RerankExample("高血压吃什么药", ("高血压患者应该按时服药",), ("感冒发烧多喝水", "胃痛胃炎")),
        RerankExample("糖尿病饮食", ("糖尿病需要控制饮食",), ("头痛失眠按摩",)),
    ])
    return folder


@pytest.fixture
def sts_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "tiny-sts"
    write_sts(folder / "sts.jsonl", [
        STSPair("高血压吃什么药", "高血压服用什么药", 5.0),
        STSPair("糖尿病饮食", "糖尿病吃什么", 3.0),
        STSPair("发烧怎么办", "胃痛怎么办", 1.0),
        STSPair("头痛失眠", "感冒发烧", 0.0),
    ])
    return folder


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CARE_CACHE_DIR", str(tmp_path / "care-cache"))
    monkeypatch.delenv("CMEDTEB_DATA", raising=False)
