"""Narrower query towers: structured pruning of a BERT-style encoder's feed-forward width (issue 41).

A cut in depth keeps the width, so a shallow tower keeps the full cost of each layer; at a short query two thirds
of a BERT layer's multiply-adds are its feed-forward block (``hidden -> intermediate -> hidden``: 2 · h · i against
the attention's 4 · h²; e5-small: h = 384, i = 1536). :func:`prune_ffn` keeps the ``width`` most important
intermediate neurons of every layer — the same count in each, so the pruned model is a plain checkpoint with a
smaller ``config.intermediate_size`` that ``AutoModel``, sentence-transformers, ONNX export and Stage I load
unchanged.

Importance of neuron j in a layer (first-order, as in structured-pruning work on BERT; no gradient needed):

    I_j = E_tokens[ |GELU(x · W1[j] + b1[j])| ] · ||W2[:, j]||

the mean magnitude of its activation over the tokens of ``texts`` (the training queries: what the query tower will
read), times the norm of the weights it writes back to the residual stream. Without texts, the activation term is
replaced by ``||W1[j]||`` (weights only). A neuron whose output weights are zero has I_j = 0 and is dropped first,
so pruning such neurons changes nothing (the tests' exact case).

Attention heads are not pruned: BERT's config derives the head size from ``hidden_size / num_attention_heads``,
so fewer heads per layer is not expressible as a plain checkpoint (transformers 5 removed ``prune_heads``).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

import torch
from torch import nn

from care.errors import CareError

logger = logging.getLogger(__name__)

#: Texts encoded at once while the activations are measured.
IMPORTANCE_BATCH = 32
#: Tokens per text while the activations are measured (queries are short).
IMPORTANCE_MAX_LENGTH = 128


def feed_forward_pairs(model: nn.Module) -> list[tuple[nn.Linear, nn.Linear]]:
    """``(intermediate.dense, output.dense)`` of every layer of a BERT-style encoder.

    Raises:
        CareError: a model without ``encoder.layer[*].intermediate.dense`` / ``output.dense`` (decoders, others).
    """
    layers = getattr(getattr(model, "encoder", None), "layer", None)
    if not isinstance(layers, nn.ModuleList) or not layers:
        raise CareError(f"feed-forward pruning needs a BERT-style encoder (encoder.layer); {type(model).__name__} "
                        "has none")
    pairs = []
    for i, layer in enumerate(layers):
        up = getattr(getattr(layer, "intermediate", None), "dense", None)
        down = getattr(getattr(layer, "output", None), "dense", None)
        if not isinstance(up, nn.Linear) or not isinstance(down, nn.Linear):
            raise CareError(f"layer {i} of {type(model).__name__} has no intermediate.dense / output.dense Linear")
        pairs.append((up, down))
    return pairs


def neuron_importance(model: nn.Module, tokenizer, texts: Sequence[str] = ()) -> list[torch.Tensor]:
    """Per layer, the importance ``I_j`` of each intermediate neuron (see the module docstring).

    Args:
        model: a BERT-style ``AutoModel``.
        tokenizer: its tokenizer.
        texts: what the tower will read (empty: weights only).
    Returns:
        One ``(intermediate_size,)`` float tensor per layer.
    """
    pairs = feed_forward_pairs(model)
    out_norms = [down.weight.detach().norm(dim=0) for _, down in pairs]
    texts = [t for t in texts if t and t.strip()]
    if not texts:
        return [up.weight.detach().norm(dim=1) * norm for (up, _), norm in zip(pairs, out_norms, strict=True)]
    sums = [torch.zeros(up.out_features) for up, _ in pairs]
    count, current = 0, {}

    def hook(index: int):
        def record(_module, _inputs, output):  # output: the activated intermediate (batch, seq, i)
            mask = current["mask"].unsqueeze(-1).to(output.dtype)
            sums[index].add_((output.detach().abs() * mask).sum(dim=(0, 1)).float())
        return record

    handles = [layer.intermediate.register_forward_hook(hook(i)) for i, layer in enumerate(model.encoder.layer)]
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            for start in range(0, len(texts), IMPORTANCE_BATCH):
                batch = tokenizer(texts[start:start + IMPORTANCE_BATCH], padding=True, truncation=True,
                                  max_length=IMPORTANCE_MAX_LENGTH, return_tensors="pt")
                current["mask"] = batch["attention_mask"]
                model(**batch)
                count += int(batch["attention_mask"].sum())
    finally:
        for handle in handles:
            handle.remove()
        model.train(was_training)
    return [s / max(count, 1) * norm for s, norm in zip(sums, out_norms, strict=True)]


def prune_ffn_in_place(model: nn.Module, width: int, importance: list[torch.Tensor]) -> list[list[int]]:
    """Keep the ``width`` most important neurons of each layer's feed-forward block (in their original order) and
    set ``config.intermediate_size``; returns the kept indices per layer.

    Raises:
        CareError: ``width`` outside ``1..intermediate_size``.
    """
    pairs = feed_forward_pairs(model)
    full = pairs[0][0].out_features
    if not 1 <= width <= full:
        raise CareError(f"--ffn-width must be between 1 and {full} (the model's intermediate size), got {width}")
    kept_all = []
    for (up, down), scores in zip(pairs, importance, strict=True):
        kept = torch.topk(scores, width).indices.sort().values
        new_up = nn.Linear(up.in_features, width, bias=up.bias is not None, dtype=up.weight.dtype)
        new_down = nn.Linear(width, down.out_features, bias=down.bias is not None, dtype=down.weight.dtype)
        with torch.no_grad():
            new_up.weight.copy_(up.weight[kept])
            if up.bias is not None:
                new_up.bias.copy_(up.bias[kept])
            new_down.weight.copy_(down.weight[:, kept])
            if down.bias is not None:
                new_down.bias.copy_(down.bias)
        _replace(model, up, new_up)
        _replace(model, down, new_down)
        kept_all.append(kept.tolist())
    model.config.intermediate_size = width
    return kept_all


def _replace(model: nn.Module, old: nn.Module, new: nn.Module) -> None:
    for module in model.modules():
        for name, child in module.named_children():
            if child is old:
                setattr(module, name, new)
                return
    raise CareError("internal: the feed-forward Linear to replace was not found")  # pragma: no cover


def prune_ffn(model_path: str | Path, width: int, output: str | Path, *, texts: Sequence[str] = ()) -> Path:
    """Save ``model_path`` with every layer's feed-forward block narrowed to ``width`` neurons (its tokenizer beside).

    Args:
        model_path: a BERT-style HF folder (e.g. a depth cut from ``care model prune``).
        width: neurons kept per layer.
        output: folder to write (atomically).
        texts: what the tower will read, for the activation term of the importance (empty: weights only).
    Returns:
        ``output``.
    """
    from transformers import AutoModel, AutoTokenizer

    from care.models.folders import atomic_dir

    model = AutoModel.from_pretrained(str(model_path))
    tokenizer = AutoTokenizer.from_pretrained(str(model_path))
    full = feed_forward_pairs(model)[0][0].out_features
    prune_ffn_in_place(model, width, neuron_importance(model, tokenizer, texts))
    with atomic_dir(Path(output)) as tmp:
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
    logger.info("narrowed the feed-forward blocks of %s from %d to %d neurons per layer (importance on %d texts) -> %s",
                model_path, full, width, len(texts), output)
    return Path(output)
