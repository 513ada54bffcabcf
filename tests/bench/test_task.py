"""TaskMetadata: validation and JSON round trip."""

import json
from pathlib import Path

import pytest

from care.bench.task import TaskMetadata
from care.data.errors import DataFormatError
from care.errors import CareError


def test_defaults_and_round_trip():
    meta = TaskMetadata(name="t", type="rerank", path=Path("/data/t"), instruction="Rank it.", extra_scores=("map_at_1000",))
    assert meta.main_score == "map_at_10"
    assert meta.scores == ("map_at_10", "mrr_at_10", "map_at_1000")
    again = TaskMetadata.from_json(meta.to_json())
    assert again == meta
    assert json.loads(meta.to_json())["path"] == "/data/t"


@pytest.mark.parametrize("kwargs, message", [
    ({"type": "classification"}, "type must be one of"),
    ({"type": "sts", "main_score": "ndcg_at_10"}, "not a sts score"),
    ({"type": "retrieval", "relevance_threshold": 0}, "relevance_threshold"),
    ({"type": "sts", "sts_role": "passage"}, "sts_role"),
])
def test_validation(kwargs, message):
    with pytest.raises(CareError, match=message):
        TaskMetadata(name="t", **kwargs)


def test_scores_per_type():
    assert TaskMetadata(name="r", type="retrieval").scores == ("ndcg_at_10", "recall_at_10", "recall_at_100", "mrr_at_10")
    assert TaskMetadata(name="s", type="sts").scores == ("pearson", "spearman")
    assert TaskMetadata(name="s", type="sts", main_score="spearman").main_score == "spearman"


def test_task_file_relative_path_and_errors(tmp_path):
    view = tmp_path / "view"
    view.mkdir()
    (view / "task.json").write_text(json.dumps({
        "name": "v", "type": "retrieval", "description": "", "main_score": "ndcg_at_10", "instruction": None,
        "split": "test", "relevance_threshold": 1, "language": "zh", "path": "../data",
    }), encoding="utf-8")
    meta = TaskMetadata.from_task_file(view / "task.json")
    assert meta.path == view / "../data" and meta.split == "test" and meta.instruction is None

    (view / "task.json").write_text('{"name": "v", "type": "retrieval", "colour": "red"}', encoding="utf-8")
    with pytest.raises(DataFormatError, match="unknown key"):
        TaskMetadata.from_task_file(view / "task.json")
    (view / "task.json").write_text('{"name": "v", "type": "retrieval",', encoding="utf-8")
    with pytest.raises(DataFormatError, match="malformed JSON"):
        TaskMetadata.from_task_file(view / "task.json")
    (view / "task.json").write_text('{"name": "v", "type": "ranking"}', encoding="utf-8")
    with pytest.raises(DataFormatError, match="task.json.*type must be one of"):
        TaskMetadata.from_task_file(view / "task.json")
