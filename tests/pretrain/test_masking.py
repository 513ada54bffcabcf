"""RetroMAE masking: measured ratios match the config; the enhanced decoder's per-row attention masks."""

from __future__ import annotations

import pytest
import torch
from transformers import AutoTokenizer

from care.pretrain.config import RetroMAEConfig
from care.pretrain.masking import IGNORE_INDEX, RetroMAECollator

from .fixtures import TEXTS

#: ~1,500 maskable tokens per batch: the sampling error of a ratio is ~0.013, so 0.04 is > 3 sigma.
TOLERANCE = 0.04


@pytest.fixture(scope="module")
def tokenizer(tiny_bert):
    return AutoTokenizer.from_pretrained(tiny_bert)


@pytest.mark.parametrize("enc, dec", [(0.3, 0.5), (0.15, 0.7)])
def test_ratios_match_config(tokenizer, enc, dec):
    torch.manual_seed(0)
    texts = TEXTS * 8
    batch = RetroMAECollator(tokenizer, RetroMAEConfig(encoder_mask_ratio=enc, decoder_mask_ratio=dec), 64)(texts)
    maskable = batch.maskable
    assert abs((batch.encoder_labels != IGNORE_INDEX).sum() / maskable.sum() - enc) < TOLERANCE
    assert not (batch.encoder_labels[~maskable] != IGNORE_INDEX).any()  # specials / padding never targets
    # enhanced decoder: fraction of each row's maskable context (other than itself) that is hidden
    eye = torch.eye(maskable.shape[1], dtype=torch.bool)
    context = maskable.unsqueeze(1) & maskable.unsqueeze(2) & ~eye
    hidden = context & ~batch.decoder_attention
    assert abs(hidden.sum() / context.sum() - dec) < TOLERANCE
    # every real token is a decoder target, nothing else
    assert torch.equal(batch.decoder_labels != IGNORE_INDEX, maskable)

    basic = RetroMAECollator(tokenizer, RetroMAEConfig(encoder_mask_ratio=enc, decoder_mask_ratio=dec,
                                                       enhanced_decoding=False), 64)(texts)
    targets = basic.decoder_labels != IGNORE_INDEX
    assert abs(targets.sum() / basic.maskable.sum() - dec) < TOLERANCE
    assert (basic.decoder_input_ids[targets] == tokenizer.mask_token_id).all()
    assert basic.decoder_attention is None


def test_enhanced_attention_rows(tokenizer):
    torch.manual_seed(1)
    batch = RetroMAECollator(tokenizer, RetroMAEConfig(), 64)(["头痛", *TEXTS[:3]])
    visible = batch.decoder_attention
    length = visible.shape[1]
    assert visible[:, :, 0].all()  # the sentence embedding slot is always visible
    assert not visible[:, torch.arange(1, length), torch.arange(1, length)].any()  # never itself
    pad = ~batch.attention_mask.bool()
    assert not (visible & pad.unsqueeze(1)).any()  # never padding
    assert len({tuple(r) for r in visible[2, 1:20].tolist()}) > 1  # rows sample different contexts


def test_encoder_masks_change_between_calls(tokenizer):
    collator = RetroMAECollator(tokenizer, RetroMAEConfig(), 64)
    a, b = collator(TEXTS), collator(TEXTS)
    assert not torch.equal(a.encoder_labels, b.encoder_labels)
    torch.manual_seed(5)
    c = collator(TEXTS)
    torch.manual_seed(5)
    d = collator(TEXTS)
    assert torch.equal(c.encoder_input_ids, d.encoder_input_ids)  # torch's RNG only: resumable
    assert torch.equal(c.decoder_attention, d.decoder_attention)
