r"""RetroMAE: retrieval-oriented pretraining via a masked auto-encoder (Xiao et al., EMNLP 2022).

* Encoder: the BERT-style model being pretrained (``AutoModelForMaskedLM``) reads the text with a
  moderate mask ratio (0.3). Its sentence embedding is the CLS hidden state ``h_X``; it also learns
  its own MLM loss ``L_enc``.
* Decoder: ONE transformer layer (a transformers ``BertLayer``, discarded after pretraining) that
  must reconstruct the text from ``h_X`` and an aggressively masked (0.5) view of the text, so the
  sentence embedding has to carry the meaning. The encoder's embedding table and MLM head are shared
  with the decoder, as in the paper's code.

  - **enhanced decoding** (default; paper §3.3): two streams. Query stream ``H1 = [h_X + p_0, ...,
    h_X + p_L]``; content stream ``H2 = [h_X, e_{x_1} + p_1, ..., e_{x_L} + p_L]`` (original tokens).
    ``A = softmax(Q(H1)·K(H2)ᵀ/√d + M)·V(H2)`` where row ``i`` of ``M`` opens position 0 and a
    random subset (``1 - ratio``) of the other tokens, never ``i`` itself; then the layer's output
    projection (residual on ``H1``) and feed-forward. Every token is a target:
    ``L_dec = -Σ_i log p(x_i | h_X, x_{s(i)})``.
  - **basic decoding**: ``[h_X ; e(masked text)_{1..L}]`` through the layer with ordinary
    self-attention; loss on the decoder-masked tokens.

``L = w_enc · L_enc + w_dec · L_dec`` (both weights 1 in the paper). After pretraining only the
encoder is kept: :meth:`RetroMAEModel.save_encoder` writes a plain ``AutoModel`` folder (+ tokenizer)
that ``AutoModel.from_pretrained`` and the ``init_query`` stage (``model.query_model``) load.
"""

from __future__ import annotations

import copy
import logging
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn
from transformers import PreTrainedModel
from transformers.models.bert.modeling_bert import BertLayer

from care.errors import CareError
from care.pretrain.config import RetroMAEConfig
from care.pretrain.masking import IGNORE_INDEX, RetroMAEBatch
from care.train.engine.losses.output import LossOutput

logger = logging.getLogger(__name__)


def masked_lm_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy over positions whose label is not ``-100`` (0 when there are none)."""
    flat = labels.reshape(-1)
    if not bool((flat != IGNORE_INDEX).any()):
        return logits.sum() * 0.0
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), flat, ignore_index=IGNORE_INDEX)


def _mlm_head(model: PreTrainedModel) -> nn.Module:
    """The prediction head of a masked-LM model (``cls`` for BERT, ``lm_head`` for (XLM-)RoBERTa)."""
    for name in ("cls", "lm_head"):
        head = getattr(model, name, None)
        if isinstance(head, nn.Module):
            return head
    raise CareError(f"{type(model).__name__}: no MLM head ('cls' or 'lm_head'); RetroMAE needs a BERT-style "
                    "AutoModelForMaskedLM")


class RetroMAEModel(nn.Module):
    """Encoder (masked LM) + one-layer decoder.

    Args:
        mlm: an ``AutoModelForMaskedLM`` (BERT family); its base model is what gets saved.
        config: loss weights and decoding mode.
    Forward:
        a :class:`~care.pretrain.masking.RetroMAEBatch`; returns ``LossOutput(loss, {"encoder_mlm",
        "decoder"})``.
    """

    def __init__(self, mlm: PreTrainedModel, config: RetroMAEConfig) -> None:
        super().__init__()
        self.mlm = mlm
        self.config = config
        self.head = _mlm_head(mlm)
        decoder_config = copy.deepcopy(mlm.config)
        decoder_config.is_decoder = False
        decoder_config.add_cross_attention = False
        self.decoder = BertLayer(decoder_config)
        if hasattr(mlm, "_init_weights"):
            self.decoder.apply(mlm._init_weights)

    @property
    def embeddings(self) -> nn.Module:
        return self.mlm.base_model.embeddings

    def sentence_embedding(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """``h_X``: the encoder's CLS hidden state ``[B, d]`` (what the query tower's CLS pooling reads)."""
        out = self.mlm.base_model(input_ids=input_ids, attention_mask=attention_mask)
        return out.last_hidden_state[:, 0]

    def decoder_logits(self, sentence: torch.Tensor, batch: RetroMAEBatch) -> torch.Tensor:
        """Decoder predictions ``[B, L, V]`` from ``h_X`` (``[B, d]``) and the decoder's view of the text only."""
        return self.head(self.decoder_hidden(sentence, batch))

    def target_loss(self, hidden: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        """MLM cross-entropy with the head applied only at target positions (the vocabulary projection
        dominates a small model's step; untargeted positions would be computed and then ignored)."""
        selected = labels != IGNORE_INDEX
        if not bool(selected.any()):
            return hidden.sum() * 0.0
        return F.cross_entropy(self.head(hidden[selected]).float(), labels[selected])

    def decoder_hidden(self, sentence: torch.Tensor, batch: RetroMAEBatch) -> torch.Tensor:
        """The decoder layer's output ``[B, L, d]`` (before the MLM head)."""
        h = sentence.unsqueeze(1)
        content = self.embeddings(input_ids=batch.decoder_input_ids)
        content = torch.cat([h.to(content.dtype), content[:, 1:]], dim=1)
        if batch.decoder_attention is None:
            additive = (1.0 - batch.attention_mask[:, None, None, :].to(content.dtype)) * torch.finfo(content.dtype).min
            hidden = self.decoder(content, attention_mask=additive)
            hidden = hidden[0] if isinstance(hidden, tuple) else hidden
        else:
            query = self.embeddings(inputs_embeds=h.expand_as(content).contiguous())
            hidden = self._two_stream(query, content, batch.decoder_attention)
        return hidden

    def _two_stream(self, query: torch.Tensor, content: torch.Tensor, visible: torch.Tensor) -> torch.Tensor:
        """The BertLayer with queries from ``query`` and keys/values from ``content`` under a per-row mask."""
        attention = self.decoder.attention
        sa = attention.self
        batch, length, _ = query.shape
        shape = (batch, length, sa.num_attention_heads, sa.attention_head_size)
        q = sa.query(query).view(shape).transpose(1, 2)
        k = sa.key(content).view(shape).transpose(1, 2)
        v = sa.value(content).view(shape).transpose(1, 2)
        ctx = F.scaled_dot_product_attention(q, k, v, attn_mask=visible.unsqueeze(1),
                                             dropout_p=sa.dropout.p if self.training else 0.0)
        ctx = ctx.transpose(1, 2).reshape(batch, length, sa.all_head_size)
        return self.decoder.feed_forward_chunk(attention.output(ctx, query))

    def forward(self, batch: RetroMAEBatch) -> LossOutput:
        out = self.mlm.base_model(input_ids=batch.encoder_input_ids, attention_mask=batch.attention_mask)
        states = out.last_hidden_state
        encoder_loss = self.target_loss(states, batch.encoder_labels)
        decoder_loss = self.target_loss(self.decoder_hidden(states[:, 0], batch), batch.decoder_labels)
        c = self.config
        total = c.encoder_loss_weight * encoder_loss + c.decoder_loss_weight * decoder_loss
        return LossOutput(total, {"encoder_mlm": encoder_loss.detach(), "decoder": decoder_loss.detach()})

    def save_encoder(self, path: str | Path, tokenizer=None) -> Path:
        """Write the encoder alone as a plain ``AutoModel`` folder (+ tokenizer); the decoder is dropped."""
        path = Path(path)
        self.mlm.base_model.save_pretrained(path)
        if tokenizer is not None:
            tokenizer.save_pretrained(path)
        return path


def load_masked_lm(name_or_path: str, *, trust_remote_code: bool = False) -> PreTrainedModel:
    """``AutoModelForMaskedLM.from_pretrained``; a plain encoder folder gets a freshly initialised MLM head."""
    from transformers import AutoModelForMaskedLM

    return AutoModelForMaskedLM.from_pretrained(name_or_path, trust_remote_code=trust_remote_code)
