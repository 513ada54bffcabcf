"""Model shapes as JSON-round-tripping dataclasses: the tiny CPU models and the paper's real ones.

* ``tiny-bert`` / ``tiny-qwen3``: a few hundred thousand parameters each, so the whole CARE recipe
  (init -> Stage I -> Stage II -> bench) runs on 2 CPU cores in minutes. Their vocabulary comes from
  a tokenizer trained on the user's texts (:mod:`care.models.tokenizer`), so ``vocab_size`` is
  replaced at build time.
* ``gte-multilingual-base``: the paper's query encoder shape (XLM-R-like: hidden 768, 12 layers,
  12 heads, vocab 250048). The real checkpoint uses its own remote code ("NewModel", RoPE); the preset
  builds an ``XLMRobertaModel`` of the same width/depth/vocabulary, good enough for speed measurement.
* ``qwen3-4b`` / ``qwen3-8b``: the paper's document encoders (numbers from the checkpoints'
  ``config.json``; transformers' ``Qwen3Config`` defaults are the 8B-style shape apart from the
  intermediate size and KV heads).

:func:`build_random_model` instantiates any preset with random weights (no download) for speed
benchmarks; :func:`count_parameters` counts parameters on the ``meta`` device (no memory).
:func:`save_random_model` trains a character tokenizer and saves it with a random-init model of a shape;
:func:`make_tiny_models` does so for the tiny query/document model folders.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import torch
from transformers import AutoModel, BertConfig, PretrainedConfig, PreTrainedModel, Qwen3Config, XLMRobertaConfig

from care.config import build
from care.data.io import write_json
from care.errors import CareError

logger = logging.getLogger(__name__)

#: Sub-folder names written by :func:`make_tiny_models`.
TINY_QUERY_DIRNAME = "tiny-bert"
TINY_DOCUMENT_DIRNAME = "tiny-qwen3"
#: Default seed for random initialisation.
DEFAULT_SEED = 0


@dataclass(frozen=True)
class EncoderShape:
    """Shape of a BERT-style bidirectional encoder (the query tower).

    ``family`` picks the transformers architecture: ``"bert"`` (BertModel) or ``"xlm-roberta"``.
    """

    name: str
    hidden_size: int
    num_hidden_layers: int
    num_attention_heads: int
    intermediate_size: int
    vocab_size: int
    max_position_embeddings: int = 512
    family: str = "bert"
    hidden_dropout_prob: float = 0.1
    attention_probs_dropout_prob: float = 0.1
    initializer_range: float = 0.02

    kind: ClassVar[str] = "encoder"
    FAMILIES: ClassVar[dict[str, type[PretrainedConfig]]] = {"bert": BertConfig, "xlm-roberta": XLMRobertaConfig}

    def __post_init__(self) -> None:
        if self.family not in self.FAMILIES:
            raise CareError(f"encoder shape {self.name!r}: unknown family {self.family!r}; use one of {sorted(self.FAMILIES)}")
        if self.hidden_size % self.num_attention_heads:
            raise CareError(
                f"encoder shape {self.name!r}: hidden_size {self.hidden_size} is not divisible by "
                f"num_attention_heads {self.num_attention_heads}"
            )

    def to_hf_config(self, **overrides: Any) -> PretrainedConfig:
        """The transformers config (``overrides`` e.g. ``vocab_size=``, ``pad_token_id=``)."""
        fields = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name not in ("name", "family")}
        fields.update(overrides)
        return self.FAMILIES[self.family](**fields)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, **dataclasses.asdict(self)}


@dataclass(frozen=True)
class DecoderShape:
    """Shape of a Qwen3-architecture decoder-only LLM (the document tower); GQA via ``num_key_value_heads``."""

    name: str
    hidden_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    intermediate_size: int
    vocab_size: int
    max_position_embeddings: int = 40960
    rope_theta: float = 1_000_000.0
    rms_norm_eps: float = 1e-6
    tie_word_embeddings: bool = False
    initializer_range: float = 0.02

    kind: ClassVar[str] = "decoder"

    def __post_init__(self) -> None:
        if self.num_attention_heads % self.num_key_value_heads:
            raise CareError(
                f"decoder shape {self.name!r}: num_attention_heads {self.num_attention_heads} must be a multiple "
                f"of num_key_value_heads {self.num_key_value_heads} (grouped-query attention)"
            )

    def to_hf_config(self, **overrides: Any) -> PretrainedConfig:
        fields = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name not in ("name", "rope_theta")}
        fields["rope_parameters"] = {"rope_type": "default", "rope_theta": self.rope_theta}
        fields.update(overrides)
        return Qwen3Config(**fields)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, **dataclasses.asdict(self)}


ModelShape = EncoderShape | DecoderShape


def shape_from_dict(data: dict[str, Any]) -> ModelShape:
    """Inverse of ``shape.to_dict()``; raises :class:`CareError` naming unknown or missing fields."""
    data = dict(data)
    kind = data.pop("kind", None)
    cls = {"encoder": EncoderShape, "decoder": DecoderShape}.get(kind)  # type: ignore[arg-type]
    if cls is None:
        raise CareError(f"model shape needs \"kind\": \"encoder\" or \"decoder\", got {kind!r}")
    return build(cls, data, source=f"{kind} model shape")


def shape_to_json(shape: ModelShape) -> str:
    return json.dumps(shape.to_dict(), indent=2)


def shape_from_json(text: str) -> ModelShape:
    return shape_from_dict(json.loads(text))


#: Dropout of the tiny BERT. Attention-probability dropout makes PyTorch's SDPA fall back to its
#: materialising math path on CPU (a Bernoulli mask over every batch x head x L x L score: most of a
#: tiny model's step); and with hidden dropout 0.1 a 2-layer 64-d BERT trained from scratch cannot even
#: overfit 64 demo pairs with InfoNCE (loss stays at ln 64 for 60 steps, while the same model without
#: dropout reaches 1.08 in 20). Tiny Qwen3, like Qwen3 itself, has no dropout.
TINY_ATTENTION_DROPOUT = 0.0
TINY_HIDDEN_DROPOUT = 0.0
#: Random-init weight scale of the tiny models. The tiny BERT keeps transformers' default (0.02):
#: an earlier 0.3 (chosen because its untrained CLS vectors looked less collapsed) kept it from
#: learning at all: symmetric InfoNCE on the demo data, 5 epochs, CLS pooling, tau 0.02, reached
#: nDCG@10 0.03 at 0.3 and 0.30 at 0.02 (0.59 after 15 epochs). The last-token pooled tiny Qwen3
#: trains faster at 0.1 than at 0.02.
TINY_ENCODER_INIT_RANGE = 0.02
TINY_DECODER_INIT_RANGE = 0.1

TINY_BERT = EncoderShape(
    name="tiny-bert", hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
    vocab_size=0, max_position_embeddings=512, attention_probs_dropout_prob=TINY_ATTENTION_DROPOUT,
    hidden_dropout_prob=TINY_HIDDEN_DROPOUT, initializer_range=TINY_ENCODER_INIT_RANGE,
)
TINY_QWEN3 = DecoderShape(
    name="tiny-qwen3", hidden_size=128, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
    head_dim=32, intermediate_size=256, vocab_size=0, max_position_embeddings=1024, tie_word_embeddings=True,
    initializer_range=TINY_DECODER_INIT_RANGE,
)
GTE_MULTILINGUAL_BASE = EncoderShape(
    name="gte-multilingual-base", hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
    intermediate_size=3072, vocab_size=250048, max_position_embeddings=8194, family="xlm-roberta",
)
QWEN3_4B = DecoderShape(
    name="qwen3-4b", hidden_size=2560, num_hidden_layers=36, num_attention_heads=32, num_key_value_heads=8,
    head_dim=128, intermediate_size=9728, vocab_size=151936, max_position_embeddings=40960, tie_word_embeddings=True,
)
QWEN3_8B = DecoderShape(
    name="qwen3-8b", hidden_size=4096, num_hidden_layers=36, num_attention_heads=32, num_key_value_heads=8,
    head_dim=128, intermediate_size=12288, vocab_size=151936, max_position_embeddings=40960, tie_word_embeddings=False,
)

PRESETS: dict[str, ModelShape] = {s.name: s for s in (TINY_BERT, TINY_QWEN3, GTE_MULTILINGUAL_BASE, QWEN3_4B, QWEN3_8B)}


def get_preset(name: str) -> ModelShape:
    try:
        return PRESETS[name]
    except KeyError:
        raise CareError(f"unknown model preset {name!r}; known presets: {', '.join(PRESETS)}") from None


def _resolve(shape: ModelShape | str) -> ModelShape:
    return get_preset(shape) if isinstance(shape, str) else shape


def build_random_model(
    shape: ModelShape | str,
    *,
    seed: int = DEFAULT_SEED,
    dtype: torch.dtype | None = None,
    device: str | torch.device | None = None,
    **config_overrides: Any,
) -> PreTrainedModel:
    """Instantiate the base model (``AutoModel``: no LM head) of a shape with seeded random weights.

    For speed benchmarks of the paper's shapes without downloading weights, and to build the tiny
    models. ``device="meta"`` allocates nothing (parameter counting).
    """
    shape = _resolve(shape)
    config = shape.to_hf_config(**config_overrides)
    if config.vocab_size <= 0:
        raise CareError(f"shape {shape.name!r} has no vocabulary size; pass vocab_size= (the tokenizer's length)")
    torch.manual_seed(seed)
    with torch.device(device or "cpu"):
        model = AutoModel.from_config(config, dtype=dtype) if dtype is not None else AutoModel.from_config(config)
    return model.eval()


def count_parameters(shape: ModelShape | str, **config_overrides: Any) -> int:
    """Number of parameters of the base model of ``shape`` (built on the meta device: no memory)."""
    model = build_random_model(shape, device="meta", **config_overrides)
    return sum(p.numel() for p in model.parameters())


def save_random_model(
    shape: ModelShape,
    texts: list[str],
    target: str | Path,
    *,
    seed: int = DEFAULT_SEED,
    dtype: torch.dtype | None = None,
    device: str | torch.device | None = None,
    min_frequency: int = 1,
    max_vocab: int | None = None,
) -> PreTrainedModel:
    """Train a character tokenizer on ``texts`` and save it with ``shape``'s base model, random weights sized to
    its vocabulary (:func:`build_random_model`), as a plain Hugging Face folder ``target``.

    Returns:
        the model (still on ``device``: the caller frees it).
    """
    from care.models.tokenizer import train_char_tokenizer

    tokenizer = train_char_tokenizer(texts, kind=shape.kind, min_frequency=min_frequency, max_vocab=max_vocab,
                                     model_max_length=shape.max_position_embeddings)
    overrides: dict[str, Any] = {"vocab_size": len(tokenizer), "pad_token_id": tokenizer.pad_token_id}
    if shape.kind == "decoder":
        overrides["eos_token_id"] = tokenizer.eos_token_id
    model = build_random_model(shape, seed=seed, dtype=dtype, device=device, **overrides)
    target = Path(target)
    target.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(target)
    tokenizer.save_pretrained(target)
    return model


def make_tiny_models(
    texts: Iterable[str],
    out_dir: str | Path,
    *,
    query_shape: EncoderShape = TINY_BERT,
    document_shape: DecoderShape = TINY_QWEN3,
    seed: int = DEFAULT_SEED,
    min_frequency: int = 1,
    max_vocab: int | None = None,
) -> tuple[Path, Path]:
    """Train the character tokenizers on ``texts`` and save a tiny BERT and a tiny Qwen3 (random init).

    Args:
        texts: training texts (read once into memory: tiny models are for small samples). The paper's
            query instructions are added so their words become single tokens.
        out_dir: parent folder; writes ``out_dir/tiny-bert`` and ``out_dir/tiny-qwen3`` as plain
            Hugging Face folders (config.json, model.safetensors, tokenizer files, ``care_shape.json``).
        query_shape, document_shape: shapes (vocab_size is replaced by the tokenizer's size).
        seed: random-init seed (same seed -> same weights).
        min_frequency, max_vocab: tokenizer training options.
    Returns:
        ``(query_model_dir, document_model_dir)``.
    """
    from care.models.instructions import CMEDTEB_INSTRUCTIONS, prompt_prefix

    texts = [t for t in texts if t and t.strip()]
    if not texts:
        raise CareError("make_tiny_models needs at least one non-empty text to train the tokenizer on")
    # The query instructions are English; without them in the vocabulary each would be spelled out
    # letter by letter (~100 tokens) and eat the query's length budget.
    texts += sorted({prompt_prefix(instruction) for instruction in CMEDTEB_INSTRUCTIONS.values()})
    out_dir = Path(out_dir)
    results = []
    for shape, dirname in ((query_shape, TINY_QUERY_DIRNAME), (document_shape, TINY_DOCUMENT_DIRNAME)):
        target = out_dir / dirname
        model = save_random_model(shape, texts, target, seed=seed, min_frequency=min_frequency, max_vocab=max_vocab)
        vocab_size = model.config.vocab_size
        write_json(target / "care_shape.json", dataclasses.replace(shape, vocab_size=vocab_size).to_dict())
        logger.info("saved %s (%d params, vocab %d) to %s", shape.name, sum(p.numel() for p in model.parameters()),
                    vocab_size, target)
        results.append(target)
    return results[0], results[1]
