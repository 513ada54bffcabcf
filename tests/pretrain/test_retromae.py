"""RetroMAE model: the decoder sees only h_X + its own view; loss falls; a plain BERT comes out and init_query loads it."""

from __future__ import annotations

import dataclasses
import json

import pytest
import torch
from transformers import AutoModel, AutoTokenizer, BertModel

from care.pretrain.config import PretrainConfig, RetroMAEConfig
from care.pretrain.masking import IGNORE_INDEX, RetroMAECollator
from care.pretrain.retromae import RetroMAEModel, load_masked_lm, masked_lm_loss
from care.pretrain.trainer import pretrain

from .fixtures import TEXTS, config_dict


@pytest.fixture(scope="module")
def parts(tiny_bert):
    torch.manual_seed(0)
    tokenizer = AutoTokenizer.from_pretrained(tiny_bert)
    model = RetroMAEModel(load_masked_lm(str(tiny_bert)), RetroMAEConfig()).eval()
    return tokenizer, model


def test_decoder_reads_only_sentence_embedding_and_its_view(parts):
    tokenizer, model = parts
    torch.manual_seed(2)
    batch = RetroMAECollator(tokenizer, RetroMAEConfig(), 32)(TEXTS[:4])
    with torch.no_grad():
        out = model(batch)
        h = model.sentence_embedding(batch.encoder_input_ids, batch.attention_mask)
        # the forward's decoder term is a function of h_X and the decoder batch alone
        direct = masked_lm_loss(model.decoder_logits(h, batch), batch.decoder_labels)
        torch.testing.assert_close(out.components["decoder"], direct)
        # changing the encoder's input changes h_X and therefore the decoder loss
        other = dataclasses.replace(batch, encoder_input_ids=batch.encoder_input_ids.roll(1, dims=0))
        assert abs(float(model(other).components["decoder"]) - float(out.components["decoder"])) > 1e-4
        # row i does not see the tokens its mask hides: changing one leaves row i's prediction unchanged
        logits = model.decoder_logits(h, batch)
        b, i = 0, 3
        hidden = [j for j in range(1, int(batch.attention_mask[b].sum()) - 1)
                  if not batch.decoder_attention[b, i, j] and j != i]
        visible = [j for j in range(1, int(batch.attention_mask[b].sum()) - 1) if batch.decoder_attention[b, i, j]]
        for cols, same in ((hidden[:1] + [i], True), (visible[:1], False)):
            ids = batch.decoder_input_ids.clone()
            ids[b, cols] = tokenizer.convert_tokens_to_ids("药")
            changed = model.decoder_logits(h, dataclasses.replace(batch, decoder_input_ids=ids))
            assert torch.allclose(changed[b, i], logits[b, i], atol=1e-5) is same
    # gradient reaches the encoder only through h_X: the decoder loss has no gradient w.r.t. the rest
    states = model.mlm.base_model(input_ids=batch.encoder_input_ids,
                                  attention_mask=batch.attention_mask).last_hidden_state.detach().requires_grad_()
    masked_lm_loss(model.decoder_logits(states[:, 0], batch), batch.decoder_labels).backward()
    assert states.grad[:, 0].abs().sum() > 0 and states.grad[:, 1:].abs().sum() == 0


@pytest.mark.parametrize("enhanced", [True, False])
def test_loss_decreases_on_repeated_corpus(tiny_root, tiny_bert, tmp_path, enhanced):
    torch.set_num_threads(1)
    cfg = PretrainConfig.from_dict(config_dict(
        "retromae", tiny_bert, tiny_root / "texts.txt", tmp_path / "run", retromae={"enhanced_decoding": enhanced},
        optim={"batch_size": 8, "max_steps": 60, "lr": 3e-3, "warmup_ratio": 0.0}))
    result = pretrain(cfg)
    rows = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == list(range(1, 61))
    first = sum(r["loss"] for r in rows[:5]) / 5
    last = sum(r["loss"] for r in rows[-5:]) / 5
    assert last < 0.8 * first, (first, last)
    assert rows[-1]["loss/decoder"] < rows[0]["loss/decoder"]
    assert result.records_seen == 60 * 8 and result.extra["decoding"] == ("enhanced" if enhanced else "basic")


def test_saved_checkpoint_is_plain_bert_and_init_query_loads_it(tiny_root, tiny_bert, tmp_path):
    from care.train.engine.config import TrainConfig
    from care.train.engine.trainer import train

    torch.set_num_threads(1)
    cfg = PretrainConfig.from_dict(config_dict("retromae", tiny_bert, tiny_root / "texts.jsonl", tmp_path / "mae",
                                               optim={"max_steps": 2}))
    result = pretrain(cfg)
    folder = tmp_path / "mae" / "model"
    assert result.model == str(folder)
    config = json.loads((folder / "config.json").read_text())
    assert config["architectures"] == ["BertModel"]
    assert not any("cls.predictions" in k or "decoder" in k
                   for k in __import__("safetensors.torch").torch.load_file(folder / "model.safetensors"))
    loaded = AutoModel.from_pretrained(folder)
    assert isinstance(loaded, BertModel)
    tokenizer = AutoTokenizer.from_pretrained(folder)
    assert tokenizer.mask_token == "[MASK]"

    # the same weights come back as the query tower's CLS state
    from care.models.query import build_query_encoder

    enc = tokenizer(TEXTS[:2], padding=True, return_tensors="pt")
    with torch.no_grad():
        cls = loaded.eval()(**enc).last_hidden_state[:, 0]
    tower = build_query_encoder(folder, max_seq_length=32)
    vectors = torch.as_tensor(tower.encode(TEXTS[:2]))
    torch.testing.assert_close(vectors, torch.nn.functional.normalize(cls, dim=-1), atol=1e-5, rtol=1e-4)

    train_file = tmp_path / "train.jsonl"
    train_file.write_text("".join(json.dumps({"query": t[:6], "pos": [t]}, ensure_ascii=False) + "\n" for t in TEXTS),
                          encoding="utf-8")
    stage = train(TrainConfig.from_dict({
        "stage": "init_query", "output_dir": str(tmp_path / "iq"),
        "model": {"query_model": str(folder), "query_max_seq_length": 32},
        "data": {"train_file": str(train_file), "n_negatives": 0},
        "optim": {"batch_size": 4, "max_steps": 2, "warmup_ratio": 0.0},
        "runtime": {"cpu": True, "log_with": None, "progress_bar": False}}))
    assert stage.global_step == 2 and stage.query_model


def test_labels_ignore_index_means_zero_loss():
    logits = torch.randn(2, 3, 5, requires_grad=True)
    loss = masked_lm_loss(logits, torch.full((2, 3), IGNORE_INDEX))
    loss.backward()
    assert float(loss.detach()) == 0.0 and logits.grad.abs().sum() == 0
