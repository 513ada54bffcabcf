"""``care.experiments.paper_tables``: typed settings every stage shares, and the table over seeds."""

from __future__ import annotations

import pytest

from care.experiments.paper_tables import (
    CHECKPOINT_EVERY_STEPS,
    Sizes,
    Variant,
    common_settings,
    summarise,
    to_markdown,
)
from care.models.instructions import RETRIEVAL_INSTRUCTION, prompt_prefix
from care.train.stage_settings import EVERY_STAGE, apply_settings


def test_the_shared_settings_are_typed_and_apply_to_every_stage():
    sizes = Sizes(rows=64, epochs=2, lr=5e-4)
    settings = common_settings(7, sizes)
    assert all(s.stage is EVERY_STAGE for s in settings)
    config = apply_settings({}, settings)
    assert config["seed"] == 7 and config["optim"] == {"epochs": 2, "batch_size": sizes.batch_size, "lr": 5e-4,
                                                        "grad_cache_chunk_size": None}
    assert config["data"]["max_examples"] == 64 and config["checkpoint"]["every_steps"] == CHECKPOINT_EVERY_STEPS
    assert config["runtime"] == {"cpu": True, "log_with": None, "progress_bar": False}
    assert config["model"]["query_prompt"] == prompt_prefix(RETRIEVAL_INSTRUCTION)  # the newline kept, no escaping


def test_the_table_is_mean_and_sample_std_over_seeds():
    variants = [Variant("CARE", "care"), Variant("w/o Stage II", "no_stage2", "stage1/model")]
    per_seed = {0: {"CARE": {"ndcg": 0.2}, "w/o Stage II": {"ndcg": 0.1}},
                1: {"CARE": {"ndcg": 0.4}, "w/o Stage II": {"ndcg": 0.1}}}
    summary = summarise("5", "stages", "demo", per_seed, variants, {"rows": 64})
    assert summary["seeds"] == [0, 1] and summary["rows"]["CARE"]["ndcg"]["mean"] == pytest.approx(0.3)
    assert summary["rows"]["CARE"]["ndcg"]["std"] == pytest.approx(0.1414, abs=1e-4)
    assert summary["rows"]["w/o Stage II"]["ndcg"]["std"] == 0.0
    md = to_markdown(summary)
    assert "| CARE | 0.3000 ± 0.1414 | 0.2000, 0.4000 |" in md and '`{"rows": 64}`' in md
