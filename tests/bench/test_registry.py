"""Registry: folders as tasks, registered CMedTEB tasks, helpful errors."""

import json

import pytest

from care.bench.cmedteb import RERANK_INSTRUCTION, RETRIEVAL_INSTRUCTION, STS_INSTRUCTION
from care.bench.registry import get_task, infer_task, list_tasks
from care.errors import CareError


def test_infer_types_from_files(retrieval_folder, rerank_folder, sts_folder):
    assert infer_task(retrieval_folder).type == "retrieval"
    assert infer_task(rerank_folder).type == "rerank"
    meta = get_task(str(sts_folder))
    assert (meta.type, meta.name, meta.path, meta.main_score) == ("sts", "tiny-sts", sts_folder, "pearson")


def test_task_json_wins(retrieval_folder):
    (retrieval_folder / "task.json").write_text(json.dumps({
        "name": "Mine", "type": "retrieval", "description": "d", "main_score": "recall_at_100",
        "instruction": "Find it.", "split": None, "relevance_threshold": 2, "language": "zh",
    }), encoding="utf-8")
    meta = get_task(retrieval_folder)
    assert (meta.name, meta.main_score, meta.instruction, meta.relevance_threshold) == ("Mine", "recall_at_100", "Find it.", 2)


def test_not_a_task_folder(tmp_path):
    (tmp_path / "notes.txt").write_text("x", encoding="utf-8")
    with pytest.raises(CareError, match="not a task folder.*notes.txt"):
        get_task(tmp_path)


def test_cmedteb_tasks_registered_with_paper_instructions():
    tasks = {t.name: t for t in list_tasks()}
    assert tasks["CMedTEB-Retrieval"].instruction == RETRIEVAL_INSTRUCTION
    assert RETRIEVAL_INSTRUCTION == "Given a Chinese medical question, retrieve medical documents that answer the question."
    for name in ("CMedTEB-Rerank", "CMedQAv1-reranking", "CMedQAv2-reranking"):
        assert tasks[name].type == "rerank" and tasks[name].instruction == RERANK_INSTRUCTION
        assert tasks[name].main_score == "map_at_10"
    assert tasks["CMedQAv1-reranking"].scores[-1] == "map_at_1000"
    assert tasks["CMedTEB-STS"].instruction == STS_INSTRUCTION == "Retrieve semantically similar text."


def test_unknown_name_suggests_close_matches():
    with pytest.raises(CareError, match="Did you mean: CMedTEB-Retrieval"):
        get_task("CMedTEB-Retreival")


def test_missing_data_says_where_it_looked(tmp_path, monkeypatch):
    with pytest.raises(CareError, match=r"no data root given \(--data-root or \$CMEDTEB_DATA\)"):
        get_task("CMedTEB-STS")
    with pytest.raises(CareError, match=f"looked in {tmp_path}/CMedTEB-STS.*CMEDTEB_DATA"):
        get_task("CMedTEB-STS", data_root=tmp_path)


def test_data_root_and_env(tmp_path, monkeypatch, sts_folder):
    target = tmp_path / "root" / "CMedTEB-STS"
    target.parent.mkdir()
    sts_folder.rename(target)
    meta = get_task("CMedTEB-STS", data_root=tmp_path / "root")
    assert meta.path == target and meta.instruction == STS_INSTRUCTION
    monkeypatch.setenv("CMEDTEB_DATA", str(tmp_path / "root"))
    assert get_task("CMedTEB-STS").path == target
