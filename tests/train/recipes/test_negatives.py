"""Model-mined hard negatives: the positive is never a negative, and every negative scores below the margin."""

from __future__ import annotations

import json

import numpy as np
import pytest

from care.errors import CareError
from care.train.recipes.model_negatives import MiningConfig, mine_hard_negatives

from ..trainer_fixtures import PAIRS


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


def _mine(tiny_dir, tmp_path, config: MiningConfig):
    from care.models.query import build_query_encoder

    model = build_query_encoder(tiny_dir / "tiny-bert", pooling="mean", max_seq_length=32)
    train = tmp_path / "train.jsonl"
    train.write_text("".join(json.dumps({"query": q, "pos": [d]}, ensure_ascii=False) + "\n" for q, d in PAIRS),
                     encoding="utf-8")
    target = tmp_path / "mined.jsonl"
    report = mine_hard_negatives(train, [d for _, d in PAIRS], model, target, config)
    return model, target, report


def test_mined_negatives_respect_the_absolute_margin(tiny_dir, tmp_path):
    margin = 0.02
    config = MiningConfig(n_negatives=1, relative_margin=None, absolute_margin=margin, range_max=len(PAIRS) - 1)
    model, target, report = _mine(tiny_dir, tmp_path, config)
    rows = [json.loads(line) for line in target.read_text(encoding="utf-8").splitlines()]
    close = 0
    for row in rows:
        q = model.encode([row["query"]])[0]
        pos = float(q @ model.encode(row["pos"])[0])
        close += not np.all(model.encode(row["neg"]) @ q < pos - margin + 1e-6)
    assert report.mined_rows > 0 and close <= report.fallback_rows


def test_a_mined_file_is_reused_only_with_the_same_settings(tiny_dir, tmp_path):
    from care.train.recipes.model_negatives import is_mined_with, mining_record

    config = MiningConfig(n_negatives=1, relative_margin=0.02, range_max=len(PAIRS) - 1)
    _, target, _ = _mine(tiny_dir, tmp_path, config)
    assert is_mined_with(target, config)
    assert not is_mined_with(target, MiningConfig(n_negatives=1, relative_margin=0.05, range_max=len(PAIRS) - 1))
    assert not is_mined_with(target, MiningConfig(n_negatives=1, relative_margin=0.02, range_max=len(PAIRS) - 2))
    assert not is_mined_with(tmp_path / "other.jsonl", config)  # never mined
    record = json.loads(mining_record(target).read_text(encoding="utf-8"))
    del record["config"]["absolute_margin"]  # a record written before the field existed: the default then
    mining_record(target).write_text(json.dumps(record), encoding="utf-8")
    assert is_mined_with(target, config)
    mining_record(target).write_text("{not json", encoding="utf-8")  # a damaged record: mine again
    assert not is_mined_with(target, config)


@pytest.mark.parametrize("field", ["relative_margin", "absolute_margin"])
def test_margins_outside_zero_one_are_rejected(field):
    with pytest.raises(CareError, match=f"{field} must be in"):
        MiningConfig(**{field: 1.5})
    with pytest.raises(CareError, match=field):
        MiningConfig(**{field: -0.1})


def test_a_filter_that_leaves_most_rows_without_a_negative_is_reported(tiny_dir, tmp_path, caplog):
    caplog.set_level("WARNING", logger="care.train.recipes.model_negatives")
    # a candidate must score 0.999 below the positive: on cosine scores none does, so every row falls back
    config = MiningConfig(n_negatives=1, relative_margin=None, absolute_margin=0.999, range_max=len(PAIRS) - 1)
    _, _, report = _mine(tiny_dir, tmp_path, config)
    assert report.fallback_rows == report.rows
    assert "loosen the margin" in caplog.text and f"{report.rows} of {report.rows} rows" in caplog.text
    assert "care train mine --margin" in caplog.text  # the flag of the command that mined, not only the recipe's
    caplog.clear()
    _mine(tiny_dir, tmp_path, MiningConfig(n_negatives=1, relative_margin=None, range_max=len(PAIRS) - 1))
    assert "loosen the margin" not in caplog.text  # no margin: every row gets a negative


def test_cli_mine_writes_the_mined_file_and_its_record(tiny_dir, tmp_path):
    from typer.testing import CliRunner

    from care.cli import app

    train = tmp_path / "train.jsonl"
    train.write_text("".join(json.dumps({"query": q, "pos": [d]}, ensure_ascii=False) + "\n" for q, d in PAIRS),
                     encoding="utf-8")
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"id": f"d{i}", "text": d}, ensure_ascii=False) + "\n"
                              for i, (_, d) in enumerate(PAIRS)), encoding="utf-8")
    out = tmp_path / "mined.jsonl"
    result = CliRunner().invoke(app, ["train", "mine", "--train", str(train), "--corpus", str(corpus), "--model",
                                      str(tiny_dir / "tiny-bert"), "--output", str(out), "--margin", "0.02",
                                      "--depth", str(len(PAIRS) - 1), "--query-prompt", "query: "])
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert len(rows) == len(PAIRS) and all(len(r["neg"]) == 1 and r["neg"][0] not in r["pos"] for r in rows)
    record = json.loads((tmp_path / "mined.jsonl.mining.json").read_text(encoding="utf-8"))
    assert record["config"]["relative_margin"] == 0.02 and record["config"]["query_prompt"] == "query: "
    assert f"{len(PAIRS)} rows" in result.output
