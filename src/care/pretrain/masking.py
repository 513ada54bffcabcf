"""RetroMAE's two maskings of one batch of texts (Xiao et al., 2022, §3).

* Encoder: BERT-style MLM masking at a *moderate* ratio (0.3) with transformers'
  ``DataCollatorForLanguageModeling`` (80 % ``[MASK]`` / 10 % random / 10 % kept; special tokens and
  padding never masked). With the character-level Chinese tokenizer of :mod:`care.models.tokenizer`
  each token is one character, so this is character masking; ``whole_word_mask`` is for word-piece
  vocabularies.
* Decoder, at an *aggressive* ratio (0.5):
  - enhanced decoding (the paper's): the decoder reads the ORIGINAL tokens as its content stream, and
    every row ``i`` gets its own attention mask: it always sees position 0 (where the sentence
    embedding is placed) and the special tokens, never itself, and each other real token with
    probability ``1 - ratio``. Targets: every non-special token.
  - basic decoding: the text with ``ratio`` of its tokens replaced by ``[MASK]``; targets: those tokens.

All randomness comes from torch's global RNG, which checkpoints save and resume restores.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from transformers import DataCollatorForLanguageModeling, PreTrainedTokenizerBase

from care.errors import CareError
from care.pretrain.config import RetroMAEConfig

#: Label value ignored by the cross-entropy (transformers' convention).
IGNORE_INDEX = -100


@dataclass
class RetroMAEBatch:
    """Tensors of one RetroMAE step (``B`` texts, ``L`` tokens).

    encoder_input_ids / encoder_labels: masked encoder input and its MLM targets (``-100`` elsewhere).
    attention_mask: ``[B, L]`` 1 for real tokens.
    decoder_input_ids: enhanced: the original tokens; basic: the decoder-masked tokens.
    decoder_labels: the decoder's reconstruction targets (``-100`` elsewhere).
    decoder_attention: enhanced: ``[B, L, L]`` bool, ``[b, i, j]`` = row ``i`` may attend to ``j``;
        basic: ``None`` (padding-only mask).
    maskable: ``[B, L]`` bool, real non-special tokens (what the ratios are measured on).
    """

    encoder_input_ids: torch.Tensor
    encoder_labels: torch.Tensor
    attention_mask: torch.Tensor
    decoder_input_ids: torch.Tensor
    decoder_labels: torch.Tensor
    decoder_attention: torch.Tensor | None
    maskable: torch.Tensor

    def to(self, device: torch.device) -> RetroMAEBatch:
        return RetroMAEBatch(**{k: (v.to(device) if isinstance(v, torch.Tensor) else v)
                                for k, v in self.__dict__.items()})


def sample_decoder_attention(maskable: torch.Tensor, attention_mask: torch.Tensor, ratio: float) -> torch.Tensor:
    """Per-row context sampling of RetroMAE's enhanced decoding.

    Returns ``[B, L, L]`` bool: row ``i`` sees position 0 (the sentence embedding), the real special
    tokens other than itself, and each maskable token ``j != i`` with probability ``1 - ratio``.
    """
    batch, length = maskable.shape
    keep = torch.rand(batch, length, length) >= ratio
    real = attention_mask.bool()
    special = real & ~maskable
    visible = (keep & maskable.unsqueeze(1)) | special.unsqueeze(1)
    visible &= ~torch.eye(length, dtype=torch.bool).unsqueeze(0)
    visible[:, :, 0] = True
    return visible


class RetroMAECollator:
    """Tokenise texts and build a :class:`RetroMAEBatch`.

    Args:
        tokenizer: the encoder's tokenizer (needs a mask token and a CLS token at position 0).
        config: ratios and decoding mode.
        max_seq_length: truncation length in tokens.
    """

    def __init__(self, tokenizer: PreTrainedTokenizerBase, config: RetroMAEConfig, max_seq_length: int) -> None:
        if tokenizer.mask_token is None:
            raise CareError("RetroMAE needs a tokenizer with a mask token (BERT-style [MASK])")
        self.tokenizer = tokenizer
        self.config = config
        self.max_seq_length = max_seq_length
        self.encoder_masker = DataCollatorForLanguageModeling(
            tokenizer, mlm_probability=config.encoder_mask_ratio, whole_word_mask=config.whole_word_mask,
            mask_replace_prob=config.mask_replace_prob, random_replace_prob=config.random_replace_prob)
        # the basic decoder's input: every selected token becomes [MASK]
        self.decoder_masker = DataCollatorForLanguageModeling(
            tokenizer, mlm_probability=config.decoder_mask_ratio, whole_word_mask=config.whole_word_mask,
            mask_replace_prob=1.0, random_replace_prob=0.0)

    def __call__(self, texts: Sequence[str]) -> RetroMAEBatch:
        enc = self.tokenizer(list(texts), truncation=True, max_length=self.max_seq_length, padding=True,
                             return_special_tokens_mask=True, return_tensors="pt",
                             return_offsets_mapping=self.config.whole_word_mask)
        ids, special = enc["input_ids"], enc["special_tokens_mask"]
        attention = enc["attention_mask"]
        maskable = attention.bool() & ~special.bool()
        offsets = enc.get("offset_mapping")
        enc_ids, enc_labels = self.encoder_masker.torch_mask_tokens(ids.clone(), special_tokens_mask=special.clone(),
                                                                    offset_mapping=offsets)
        if self.config.enhanced_decoding:
            dec_ids = ids.clone()
            dec_labels = ids.masked_fill(~maskable, IGNORE_INDEX)
            dec_attention = sample_decoder_attention(maskable, attention, self.config.decoder_mask_ratio)
        else:
            dec_ids, dec_labels = self.decoder_masker.torch_mask_tokens(ids.clone(), special_tokens_mask=special.clone(),
                                                                        offset_mapping=offsets)
            dec_attention = None
        return RetroMAEBatch(enc_ids, enc_labels, attention, dec_ids, dec_labels, dec_attention, maskable)
