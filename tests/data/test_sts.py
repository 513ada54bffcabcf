"""care.data.sts: STS files."""

import pytest

from care.data.errors import DataFormatError
from care.data.sts import STSPair, load_sts, write_sts


def test_sts_round_trip_and_errors(tmp_path):
    path = tmp_path / "sts.jsonl"
    write_sts(path, [STSPair("a", "b", 1.0), STSPair("c", "d", 0)])
    assert [p.score for p in load_sts(path)] == [1.0, 0.0]
    path.write_text('{"sentence1": "a", "sentence2": "b", "score": "high"}\n', encoding="utf-8")
    with pytest.raises(DataFormatError, match="line 1, field 'score': expected a number, got 'high'"):
        load_sts(path)
    path.write_text('{"sentence1": "a", "sentence2": "b", "score": 1}\n', encoding="utf-8")
    with pytest.raises(DataFormatError, match="at least two"):
        load_sts(path)
