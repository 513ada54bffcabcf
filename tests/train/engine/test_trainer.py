"""Each stage trains on tiny models, lowers the loss on a toy set, and writes loadable outputs."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest
import torch

from care.train.engine.config import TrainConfig
from care.train.engine.trainer import Trainer, read_result, train

from ..trainer_fixtures import PAIRS, alignment_rows, folder_digest, tiny_config_dict, toy_rows


def _losses(out: Path) -> list[float]:
    return [json.loads(line)["loss"] for line in (out / "metrics.jsonl").read_text().splitlines()]


def _toy_loss(config: TrainConfig, query_path: str | None, document_path: str | None) -> float:
    """The stage's loss on the whole toy set (every row, both of its negatives), dropout off."""
    from care.train.engine.stage import build_stage
    from care.train.engine.towers import load_document_tower, load_query_tower

    stage = build_stage(config)
    towers = {}
    if query_path:
        towers["query"] = load_query_tower(config.model, path=query_path).eval()
    if document_path:
        towers["document"] = towers["teacher"] = load_document_tower(config.model, trainable=False,
                                                                      path=document_path)
    rows = toy_rows()
    texts = {"query": [r["query"] for r in rows], "positive": [r["pos"][0] for r in rows],
             "negative": [n for r in rows for n in r["neg"]]}
    with torch.no_grad():
        emb = {f: towers[stage.field_towers[f]].encode(t, convert_to_tensor=True) for f, t in texts.items()}
        out = stage.compute_loss(emb, n_negatives=2)
    return float(out if isinstance(out, torch.Tensor) else out.loss)


@pytest.mark.parametrize("stage", ["init_query", "init_document", "stage1_sft", "stage2"])
def test_stage_reduces_loss_and_saves(stage, tiny_dir, tmp_path):
    torch.set_num_threads(1)
    out = tmp_path / stage
    config = TrainConfig.from_dict(tiny_config_dict(tiny_dir, stage, out))
    result = train(config)
    assert result.global_step == 6 and len(_losses(out)) == 6
    assert read_result(out).completed
    q0 = str(tiny_dir / "tiny-bert") if stage != "init_document" else None
    d0 = str(tiny_dir / "tiny-qwen3") if stage != "init_query" else None
    q1 = str(out / "query") if q0 else None
    d1 = str(out / "document") if stage in ("init_document", "stage2") else d0
    before, after = _toy_loss(config, q0, d0), _toy_loss(config, q1, d1)
    assert after < before, (before, after)
    from sentence_transformers import SentenceTransformer

    if q1:
        assert SentenceTransformer(q1, device="cpu").encode(["头痛"]).shape == (1, 64)
    if stage in ("init_document", "stage2"):
        assert (out / "document" / "adapter_config.json").is_file()  # LoRA saved as an adapter
    if stage in ("stage1_sft", "stage2"):
        care = SentenceTransformer(str(out / "model"), device="cpu")
        assert care.encode_query(["头痛"]).shape == care.encode_document(["头痛"]).shape == (1, 64)


def test_stage1_document_tower_frozen(tiny_dir, tmp_path):
    """Stage I: the document tower gets no gradient, no optimizer slot, no state; its weights do not change."""
    torch.set_num_threads(1)
    before = folder_digest(tiny_dir / "tiny-qwen3")
    out = tmp_path / "s1"
    trainer = Trainer(TrainConfig.from_dict(tiny_config_dict(tiny_dir, "stage1", out)))
    result = trainer.train()

    model = trainer.accelerator.unwrap_model(trainer.model)
    assert set(model.towers) == {"query"}  # the document tower is not even part of the trained module
    optimized = {id(p) for g in trainer.optimizer.param_groups for p in g["params"]}
    query_params = {id(p) for p in model.towers["query"].parameters()}
    assert optimized == query_params
    state_params = {id(p) for p in trainer.optimizer.state}
    assert state_params and state_params <= query_params  # (BERT's unused pooler gets no state at all)
    losses = _losses(out)
    assert losses[-1] < losses[0]
    assert {"loss/contrastive", "loss/mse"} <= set(json.loads((out / "metrics.jsonl").read_text().splitlines()[0]))

    # the teacher (frozen) tower loads with requires_grad False everywhere
    from care.train.engine.towers import load_document_tower

    frozen = load_document_tower(trainer.config.model, trainable=False)
    assert not any(p.requires_grad for p in frozen.parameters())
    # weights on disk untouched, and the CARE model's document route equals the original tower
    assert folder_digest(tiny_dir / "tiny-qwen3") == before
    from sentence_transformers import SentenceTransformer

    care = SentenceTransformer(result.care_model, device="cpu")
    texts = [d for _, d in PAIRS[:3]]
    np.testing.assert_array_equal(care.encode_document(texts), frozen.encode(texts))
    # teacher embeddings were cached on disk
    assert any((out / "teacher_cache").rglob("embeddings.npy"))


class FakeTeacher:
    """A frozen 'encoder' giving each text a fixed random unit vector (seeded by its hash)."""

    name = "fake-teacher"
    fingerprint = "fake-teacher-v1"
    dim = 64
    calls = 0

    def _vec(self, text: str) -> np.ndarray:
        seed = int(hashlib.sha1(text.encode()).hexdigest()[:8], 16)
        v = np.random.default_rng(seed).standard_normal(self.dim).astype(np.float32)
        return v / np.linalg.norm(v)

    def encode_queries(self, texts, *, instruction=None, batch_size=32, show_progress=False):
        return np.stack([self._vec(t) for t in texts])

    def encode_documents(self, texts, *, batch_size=32, show_progress=False):
        FakeTeacher.calls += 1
        return np.stack([self._vec(t) for t in texts])


def _stage1_loss(config: TrainConfig, query_path: str) -> float:
    """Stage I loss over every alignment row against the fake teacher's vectors, dropout off."""
    from care.train.engine.stage import build_stage
    from care.train.engine.towers import load_query_tower

    rows, teacher = alignment_rows(), FakeTeacher()
    tower = load_query_tower(config.model, path=query_path).eval()
    with torch.no_grad():
        emb = {"query": tower.encode([r["query"] for r in rows], convert_to_tensor=True),
               "positive": torch.from_numpy(teacher.encode_queries([r["pos"][0] for r in rows])),
               "negative": torch.from_numpy(teacher.encode_queries([r["neg"][0] for r in rows]))}
        out = build_stage(config).compute_loss(emb, n_negatives=1)
    return float(out if isinstance(out, torch.Tensor) else out.loss)


def test_stage1_with_precomputed_fake_encoder_teacher(tiny_dir, tmp_path):
    """Any frozen care Encoder can be the Stage I teacher; its vectors are computed once and cached."""
    torch.set_num_threads(1)
    FakeTeacher.calls = 0
    cache = tmp_path / "cache"
    cfg = tiny_config_dict(tiny_dir, "stage1", tmp_path / "a",
                           model={"document_model": None, "teacher": {"kind": "factory",
                                  "factory": "unused:unused", "cache_dir": str(cache)}})
    result = train(TrainConfig.from_dict(cfg), teacher=FakeTeacher())
    assert FakeTeacher.calls == 1  # every distinct text embedded in one pass
    config = TrainConfig.from_dict(cfg)
    assert _stage1_loss(config, str(tmp_path / "a" / "query")) < _stage1_loss(config, str(tiny_dir / "tiny-bert"))
    assert result.care_model is None and result.query_model  # no CARE document tower to combine with
    # a second run reuses the on-disk cache: the teacher is not called again
    cfg["output_dir"] = str(tmp_path / "b")
    train(TrainConfig.from_dict(cfg), teacher=FakeTeacher())
    assert FakeTeacher.calls == 1


def test_stage1_aligns_a_static_embedding_query_tower(tiny_dir, tmp_path):
    """A 0-layer cut (:data:`care.models.prune.STATIC_TOWER`) trains its token embeddings in Stage I and gets closer
    to the teacher, like any cut."""
    torch.set_num_threads(1)
    from safetensors.torch import load_file

    from care.models.prune import STATIC_TOWER, prune_layers

    static = prune_layers(tiny_dir / "tiny-bert", STATIC_TOWER, tmp_path / "static")
    cfg = tiny_config_dict(tiny_dir, "stage1", tmp_path / "a",
                           model={"query_model": str(static), "query_pooling": "mean", "document_model": None,
                                  "teacher": {"kind": "factory", "factory": "unused:unused",
                                              "cache_dir": str(tmp_path / "cache")}},
                           optim={"max_steps": 12})
    train(TrainConfig.from_dict(cfg), teacher=FakeTeacher())
    config = TrainConfig.from_dict(cfg)
    assert _stage1_loss(config, str(tmp_path / "a" / "query")) < _stage1_loss(config, str(static))
    before = load_file(str(static / "model.safetensors"))
    after = load_file(str(next((tmp_path / "a" / "query").rglob("model.safetensors"))))
    name = next(k for k in before if k.endswith("word_embeddings.weight"))
    assert not torch.equal(before[name], after[next(k for k in after if k.endswith("word_embeddings.weight"))])


def test_existing_checkpoints_need_resume(tiny_dir, tmp_path):
    from care.errors import CareError

    cfg = tiny_config_dict(tiny_dir, "init_query", tmp_path / "r", optim={"max_steps": 2}, checkpoint={"every_steps": 1})
    train(TrainConfig.from_dict(cfg))
    with pytest.raises(CareError, match="--resume"):
        train(TrainConfig.from_dict(cfg))


def test_query_side_alignment_rows_get_the_instruction_document_side_rows_do_not():
    from care.data.training import DOC_ALIGN, QUERY_ALIGN
    from care.train.engine.batches import query_text

    prefix = "Instruct: 检索\nQuery: "
    assert query_text("头痛", None, QUERY_ALIGN, prefix) == prefix + "头痛"
    assert query_text("头痛", None, None, prefix) == prefix + "头痛"
    assert query_text("多喝水，注意休息。", None, DOC_ALIGN, prefix) == "多喝水，注意休息。"
    assert query_text("头痛", "判断", None, prefix) == "Instruct: 判断\nQuery: 头痛"


def test_stage1_sft_without_hard_negatives(tiny_dir, tmp_path):
    """``data.n_negatives=0``: query-side SFT on rows with no ``neg`` trains on in-batch negatives only.

    The e5-teacher student does best this way on the dev set (mined BM25 negatives there are often
    unlabelled positives); the loss is InfoNCE over the batch's positives, and the same file is
    refused, naming its line, when hard negatives are asked for.
    """
    from care.data.errors import DataFormatError
    from care.train.engine.stage import build_stage

    torch.set_num_threads(1)
    rows = [{"query": q, "pos": [d]} for q, d in PAIRS]
    file = tmp_path / "no_neg.jsonl"
    file.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    out = tmp_path / "sft0"
    config = TrainConfig.from_dict(tiny_config_dict(tiny_dir, "stage1_sft", out,
                                                    data={"train_file": str(file), "n_negatives": 0}))
    result = train(config)
    assert result.global_step == 6
    losses = _losses(out)
    assert losses[-1] < losses[0]

    stage = build_stage(config)
    gen = torch.Generator().manual_seed(0)
    q = torch.nn.functional.normalize(torch.randn(4, 8, generator=gen), dim=-1)
    p = torch.nn.functional.normalize(torch.randn(4, 8, generator=gen), dim=-1)
    got = stage.compute_loss({"query": q, "positive": p}, n_negatives=0)
    got = float(got if isinstance(got, torch.Tensor) else got.loss)
    expected = float(torch.nn.functional.cross_entropy(q @ p.T / config.loss.temperature, torch.arange(4)))
    assert got == pytest.approx(expected, rel=1e-5)

    with pytest.raises(DataFormatError, match=r"no_neg\.jsonl.*line 1|line 1.*no_neg\.jsonl"):
        train(TrainConfig.from_dict(tiny_config_dict(tiny_dir, "stage1_sft", tmp_path / "sft1",
                                                     data={"train_file": str(file), "n_negatives": 1})))


def test_stage2_document_lr_applies_to_document_tower_only(tiny_dir, tmp_path):
    """``optim.document_lr``: every document-tower parameter sits in a group at that lr, the query
    tower's at ``optim.lr``; unset, all groups share ``optim.lr``."""
    torch.set_num_threads(1)
    data = tiny_config_dict(tiny_dir, "stage2", tmp_path / "s2")
    data["optim"] = {**data.get("optim", {}), "lr": 1e-3, "document_lr": 1e-5, "max_steps": 2}
    trainer = Trainer(TrainConfig.from_dict(data))
    trainer.train()
    model = trainer.accelerator.unwrap_model(trainer.model)
    document = {id(p) for p in model.towers["document"].parameters() if p.requires_grad}
    query = {id(p) for p in model.towers["query"].parameters() if p.requires_grad}
    lr_of = {id(p): g["initial_lr"] for g in trainer.optimizer.param_groups for p in g["params"]}
    assert document and query and set(lr_of) == document | query
    assert {lr_of[p] for p in document} == {1e-5}
    assert {lr_of[p] for p in query} == {1e-3}

    data["optim"].pop("document_lr")
    data["output_dir"] = str(tmp_path / "s2_same")
    trainer = Trainer(TrainConfig.from_dict(data))
    trainer.train()
    assert {g["initial_lr"] for g in trainer.optimizer.param_groups} == {1e-3}
    assert len(trainer.optimizer.param_groups) == 2  # decay / no decay, as before the option existed


@pytest.mark.parametrize(("setting", "fused"), [(None, True), (False, False)])
def test_the_trainer_runs_adamw_fused_on_the_cpu_unless_told_not_to(tiny_dir, tmp_path, setting, fused):
    """``runtime.fused_optimizer``: unset, the CPU run steps with the fused kernel; ``false``, PyTorch's loop."""
    torch.set_num_threads(1)
    data = tiny_config_dict(tiny_dir, "stage2", tmp_path / "s2", optim={"max_steps": 2},
                            runtime={"fused_optimizer": setting})
    trainer = Trainer(TrainConfig.from_dict(data))
    trainer.train()
    assert {bool(g["fused"]) for g in trainer.optimizer.param_groups} == {fused}
    assert read_result(tmp_path / "s2").global_step == 2


def test_document_lr_must_be_positive(tiny_dir, tmp_path):
    from care.train.engine.config import ConfigError

    data = tiny_config_dict(tiny_dir, "stage2", tmp_path / "bad")
    data["optim"] = {**data.get("optim", {}), "document_lr": 0}
    with pytest.raises(ConfigError, match="optim.document_lr"):
        TrainConfig.from_dict(data)


def test_a_finished_stage_drops_its_checkpoints_and_is_not_trained_again(tiny_dir, tmp_path):
    """Checkpoints (weights + optimiser state) only serve resume: once train_result.json is written
    they are deleted unless asked for, and resuming the finished stage returns its result untouched."""
    from care.errors import CareError
    from care.train.engine.checkpoint import checkpoint_root

    out = tmp_path / "r"
    cfg = tiny_config_dict(tiny_dir, "init_query", out, optim={"max_steps": 2}, checkpoint={"every_steps": 1})
    first = train(TrainConfig.from_dict(cfg))
    assert not checkpoint_root(out).exists()
    assert first.train_seconds is not None and first.train_seconds > 0
    weights = (out / "query" / "model.safetensors").read_bytes()
    again = train(TrainConfig.from_dict(cfg), resume=True)
    assert again.global_step == first.global_step == 2
    assert (out / "query" / "model.safetensors").read_bytes() == weights
    with pytest.raises(CareError, match="finished stage"):
        train(TrainConfig.from_dict(cfg))

    kept = tmp_path / "kept"
    cfg = tiny_config_dict(tiny_dir, "init_query", kept, optim={"max_steps": 2},
                           checkpoint={"every_steps": 1, "keep_after_training": True})
    train(TrainConfig.from_dict(cfg))
    assert [p.name for p in sorted(checkpoint_root(kept).iterdir())] == ["step-1", "step-2"]


def test_save_prompts_stores_the_training_prefixes_in_every_saved_folder(tiny_dir, tmp_path):
    """With ``model.save_prompts`` (the e5 preset) the towers and the CARE model carry the prefixes they were
    trained with, so loaders query them as trained; without it they carry none."""
    from care.encoders.registry import load_model
    from care.encoders.stored_prompts import PROMPTS_FILE

    prompts = {"query_prompt": "query: ", "document_prompt": "passage: ", "lora": None}
    out = tmp_path / "stage2"
    config = TrainConfig.from_dict(tiny_config_dict(tiny_dir, "stage2", out, optim={"max_steps": 1},
                                                    model={**prompts, "save_prompts": True}))
    train(config)
    for folder in ("query", "document", "model"):
        stored = json.loads((out / folder / PROMPTS_FILE).read_text(encoding="utf-8"))
        assert stored == {"query_prefix": "query: ", "document_prefix": "passage: ", "instructions": False}
    assert load_model(str(out / "model")).config.query_prefix == "query: "
    plain = tmp_path / "plain"
    train(TrainConfig.from_dict(tiny_config_dict(tiny_dir, "stage2", plain, optim={"max_steps": 1}, model=prompts)))
    assert not (plain / "model" / PROMPTS_FILE).exists()
