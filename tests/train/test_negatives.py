"""Model-mined hard negatives: the positive is never a negative, and every negative scores below the margin."""

from __future__ import annotations

import json

import numpy as np
import pytest

from care.errors import CareError
from care.train.negatives import MiningConfig, mine_hard_negatives

from .trainer_fixtures import PAIRS


def test_mined_negatives_respect_the_relative_margin(tiny_dir, tmp_path):
    from care.models.query import build_query_encoder

    model = build_query_encoder(tiny_dir / "tiny-bert", pooling="mean", max_seq_length=32)
    train = tmp_path / "train.jsonl"
    train.write_text("".join(json.dumps({"query": q, "pos": [d], "type": "x"}, ensure_ascii=False) + "\n"
                             for q, d in PAIRS), encoding="utf-8")
    corpus = [d for _, d in PAIRS]
    config = MiningConfig(n_negatives=2, relative_margin=0.05, range_max=len(corpus) - 1)
    report = mine_hard_negatives(train, corpus, model, tmp_path / "mined.jsonl", config)
    rows = [json.loads(line) for line in (tmp_path / "mined.jsonl").read_text(encoding="utf-8").splitlines()]
    assert len(rows) == len(PAIRS) == report.rows and all(r["type"] == "x" for r in rows)
    outside_margin = 0
    for row in rows:
        assert row["neg"] and row["pos"][0] not in row["neg"]
        q = model.encode([row["query"]])[0]
        pos = float(q @ model.encode(row["pos"])[0])
        outside_margin += not np.all(model.encode(row["neg"]) @ q < pos - abs(pos) * 0.05 + 1e-6)
    assert report.mined_rows > 0 and outside_margin <= report.fallback_rows  # only random fallbacks may be close
    record = json.loads((tmp_path / "mined.jsonl.mining.json").read_text(encoding="utf-8"))
    assert record["config"]["relative_margin"] == 0.05 and record["report"]["rows"] == len(PAIRS)


def test_mining_config_is_checked():
    with pytest.raises(CareError, match="n_negatives"):
        MiningConfig(n_negatives=0)
    with pytest.raises(CareError, match="at least"):
        MiningConfig(n_negatives=8, range_max=5)
