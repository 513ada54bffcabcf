"""Layer pruning: a shallow query encoder cut from the layers of a (document) encoder.

The KALE and Wang & Lyu baselines of the paper initialise the query encoder from the first ``n``
transformer layers of the document encoder, then align it (``care.train`` stages ``kale_align`` /
``embed_distill``). ``keep="strided"`` instead keeps every ``depth // n``-th layer starting at the
first (DistilBERT's initialisation: 6 of 12 = layers 0, 2, ..., 10), which spans the whole network
and starts distillation much closer to the teacher (multilingual-e5-small on the dev set, untrained
6-layer student against e5 documents: nDCG@10 0.087 strided vs 0.007 first-6;
``benchmarks/e5_student_starts.py``).
:func:`prune_layers` does the cut for any Hugging Face ``AutoModel``:

* BERT-style encoders (``model.encoder.layer``), decoder LLMs such as Qwen3 / Llama (``model.layers``)
  and GPT-2 style models (``model.h``) — the layer ``ModuleList`` is found generically;
* ``config.num_hidden_layers`` (or ``n_layer`` / ``num_layers``) and every per-layer list in the
  config whose length equals the layer count (Qwen3's ``layer_types``, ...) keep the kept layers'
  entries (a reloaded decoder numbers its KV-cache slots 0..n-1 from the config);
* the source may be a plain HF folder / hub id or a SentenceTransformer folder written by a
  ``care.train`` stage (e.g. ``init_document/document``); a LoRA adapter in it is merged first.

What the pruned model computes (``keep="first"``): for a BERT-style encoder, its ``last_hidden_state`` equals
``hidden_states[n]`` of the original (``output_hidden_states=True``). A decoder LLM keeps its final
norm (``model.norm``), which is applied after the last kept layer: the pruned output equals
``norm(hidden_states[n])`` of the original, i.e. the original's states *up to the final norm*.

For a decoder the saved tokenizer is made to append EOS (:func:`care.models.document.ensure_eos_appended`),
so the folder is a ready query tower for ``care.train`` with ``model.query_pooling: lasttoken``.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from torch import nn

from care.errors import CareError

logger = logging.getLogger(__name__)

#: Attribute paths of the transformer-layer ``ModuleList`` in the common architectures, tried in order.
LAYER_PATHS: tuple[str, ...] = ("encoder.layer", "layers", "h", "model.layers", "transformer.h", "decoder.layers")
#: Config attributes that hold the layer count.
LAYER_COUNT_KEYS: tuple[str, ...] = ("num_hidden_layers", "n_layer", "num_layers")
#: ``first``: layers 0..n-1 (KALE, Wang & Lyu); ``strided``: layers 0, s, 2s, ... with s = depth // n.
KEEP_MODES: tuple[str, ...] = ("first", "strided")
#: A cut to no layer at all is a static-embedding tower: each token's embedding (token + position + type, then the
#: embeddings' LayerNorm), mean-pooled — sentence-transformers' ``StaticEmbedding`` with positions, initialised
#: from the model's own input embeddings and trained by Stage I like any cut (keep its embeddings trainable:
#: ``model.freeze_query_embeddings`` false). Being a BERT folder still, it exports to ONNX and is timed like the
#: other cuts: the extreme point of the query tower's quality-latency curve (issue 41).
STATIC_TOWER = 0


def _check_keep(keep: str) -> None:
    if keep not in KEEP_MODES:
        raise CareError(f"keep={keep!r} is not supported; use one of {', '.join(KEEP_MODES)}")


def select_layers(depth: int, n_layers: int, keep: str = "first") -> list[int]:
    """Indices of the layers to keep out of ``depth`` (see :data:`KEEP_MODES`); none for ``n_layers=0``
    (the static-embedding tower: :data:`STATIC_TOWER`).

    Raises:
        CareError: ``n_layers`` outside ``0..depth`` or an unknown ``keep``.
    """
    _check_keep(keep)
    if not 0 <= n_layers <= depth:
        raise CareError(f"--layers must be between 0 and {depth} (the model's depth), got {n_layers}")
    if keep == "first" or n_layers == 0:
        return list(range(n_layers))
    stride = depth // n_layers
    return [i * stride for i in range(n_layers)]


def find_layers(model: nn.Module) -> tuple[str, nn.ModuleList]:
    """``(attribute path, ModuleList)`` of the transformer blocks of ``model``.

    Raises:
        CareError: no known layer list (the message lists the paths tried).
    """
    for path in LAYER_PATHS:
        node: Any = model
        for part in path.split("."):
            node = getattr(node, part, None)
            if node is None:
                break
        if isinstance(node, nn.ModuleList) and len(node) > 0:
            return path, node
    raise CareError(f"cannot find the transformer layers of {type(model).__name__}: none of "
                    f"{', '.join(LAYER_PATHS)} is a non-empty ModuleList")


def _layer_count_key(config) -> str:
    for key in LAYER_COUNT_KEYS:
        if isinstance(getattr(config, key, None), int):
            return key
    raise CareError(f"{type(config).__name__} has none of {', '.join(LAYER_COUNT_KEYS)}; cannot record the new depth")


def prune_config(config, n_layers: int | list[int]) -> list[str]:
    """Keep layers ``n_layers`` (a count = the first ones, or indices) in ``config``; returns changed keys.

    The layer count becomes the number kept and every per-layer list keeps the kept layers' entries.
    """
    key = _layer_count_key(config)
    total = getattr(config, key)
    kept = list(range(n_layers)) if isinstance(n_layers, int) else list(n_layers)
    changed = [key]
    for name, value in list(vars(config).items()):
        if name != key and isinstance(value, (list, tuple)) and len(value) == total:
            setattr(config, name, type(value)(value[i] for i in kept))
            changed.append(name)
    setattr(config, key, len(kept))
    return changed


#: Layer paths of bidirectional (BERT-style) encoders; every other layer path is a decoder's.
ENCODER_LAYER_PATHS: frozenset[str] = frozenset({"encoder.layer"})


def is_decoder_layer_path(layer_path: str) -> bool:
    """True when the layers found at ``layer_path`` belong to a decoder LLM (``layers`` / ``h``), not a BERT encoder."""
    return layer_path not in ENCODER_LAYER_PATHS


@contextlib.contextmanager
def _load(model_path: str | Path, trust_remote_code: bool) -> Iterator[tuple[nn.Module, Any]]:
    """Yield ``(base model, tokenizer)`` of an HF checkpoint or a SentenceTransformer folder (LoRA merged)."""
    path = Path(model_path)
    if (path / "modules.json").is_file():
        from sentence_transformers import SentenceTransformer

        from care.models.lora import has_lora, lora_merged

        st = SentenceTransformer(str(path), device="cpu", trust_remote_code=trust_remote_code)
        transformer = st[0]
        hf_model = transformer.auto_model
        ctx = lora_merged(hf_model) if has_lora(hf_model) else contextlib.nullcontext(hf_model)
        with ctx as merged:
            yield merged, transformer.tokenizer
        return
    from transformers import AutoModel, AutoTokenizer

    source = str(path) if path.exists() else str(model_path)
    yield (AutoModel.from_pretrained(source, trust_remote_code=trust_remote_code),
           AutoTokenizer.from_pretrained(source, trust_remote_code=trust_remote_code))


def prune_layers(model_path: str | Path, n_layers: int, output: str | Path, *, keep: str = "first",
                 trust_remote_code: bool = False) -> Path:
    """Keep ``n_layers`` transformer layers of a model (the first ones by default) and save it with its tokenizer.

    Args:
        model_path: HF folder or hub id (BERT-style encoder or decoder LLM), or a SentenceTransformer
            folder of a ``care.train`` stage (its LoRA adapter, if any, is merged before the cut).
        n_layers: layers to keep, ``0 <= n_layers <= depth`` (0: :data:`STATIC_TOWER`).
        output: folder to write (atomically); loadable by ``AutoModel`` and usable as ``model.query_model``.
        keep: which layers: ``"first"`` (the baselines' choice) or ``"strided"`` (see :func:`select_layers`).
        trust_remote_code: for checkpoints with their own modelling code.
    Returns:
        ``output`` as a :class:`~pathlib.Path`.
    Raises:
        CareError: bad ``n_layers`` / ``keep`` or an architecture whose layers cannot be found.
    """
    from care.models.folders import atomic_dir

    _check_keep(keep)  # before the model is loaded
    output = Path(output)
    with _load(model_path, trust_remote_code) as (model, tokenizer):
        layer_path, layers = find_layers(model)
        depth = len(layers)
        kept = select_layers(depth, n_layers, keep)
        parent_path, _, attr = layer_path.rpartition(".")
        parent = model.get_submodule(parent_path) if parent_path else model
        setattr(parent, attr, nn.ModuleList([layers[i] for i in kept]))
        changed = prune_config(model.config, kept)
        decoder = is_decoder_layer_path(layer_path)
        if decoder:
            from care.models.document import ensure_eos_appended

            ensure_eos_appended(tokenizer)
        with atomic_dir(output) as tmp:
            model.save_pretrained(tmp)
            tokenizer.save_pretrained(tmp)
    logger.info("pruned %s from %d to %d layers %s (%s; config %s) -> %s", model_path, depth, n_layers, kept,
                layer_path, ", ".join(changed), output)
    if decoder:
        logger.info("decoder query tower: train it with model.query_pooling: lasttoken")
    return output
