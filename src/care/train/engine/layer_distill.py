"""Layer-wise distillation of a shallow query tower from a deep frozen teacher (TinyBERT / MiniLM v2 style).

CARE's Stage I aligns only the *outputs* of the query tower to the document tower's vectors (Eq. 3: Asym-InfoNCE
+ MSE). A tower cut to a few layers of the teacher can also learn what the teacher's layers compute, beside that
output alignment. Two terms, each weighted in :class:`care.train.engine.config.LossConfig` and added to the stage's loss:

- **hidden states** (TinyBERT, Jiao et al. 2020): student layer ``k`` of ``L`` (1-based output) matches teacher
  layer ``m(k) = round(k · N / L)`` of ``N``, by mean squared error over the non-padding tokens,
  ``L_hid = 1/L · Σ_k mean_t ‖h_s^k(t) − h_t^{m(k)}(t)‖² / d`` (``lambda_hidden``; the two widths must agree:
  a strided cut of the teacher, as CARE's e5 towers are);
- **self-attention relations** (MiniLM v2, Wang et al. 2021) of the student's last layer and the teacher's
  (``relation_layer``): for each of the query, key and value projections ``X``, split into ``R`` relation
  heads of width ``d_r``, ``A_X = softmax(X_r X_rᵀ / √d_r)`` over the non-padding tokens, and
  ``L_rel = 1/3 Σ_X mean_{r,t} KL(A_X^teacher(t) ‖ A_X^student(t))`` (``lambda_relations``; any widths that
  ``R`` divides).

Both towers read the same token ids (the student's tokenisation of the batch), so the teacher must share the
student's tokenizer; :class:`LayerDistiller` checks that on the first batch. The teacher runs frozen, without
gradients, on the query tower's texts only (the ``query`` field).

Supported encoders: the BERT family (``encoder.layer[i].attention.self.{query,key,value}``: BERT, XLM-R, e5)
and decoder LLMs (``layers[i].self_attn.{q,k,v}_proj``: Qwen, Llama). A 0-layer (static) tower has no layers.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from care.errors import CareError

#: Names of the query / key / value projections inside an attention block, per family (BERT, decoder LLMs).
PROJECTION_NAMES: tuple[tuple[str, str, str], ...] = (("query", "key", "value"), ("q_proj", "k_proj", "v_proj"))
HIDDEN, RELATIONS = "hidden", "relations"


class LayerDistillError(CareError):
    """The towers cannot be distilled layer-wise (no layers, different tokenizers or widths, unknown family)."""


def transformer_layers(model: nn.Module) -> nn.ModuleList:
    """The transformer blocks of a Hugging Face model, or of the one a SentenceTransformer holds
    (:func:`care.models.prune.find_layers`).

    Raises :class:`LayerDistillError` when there are none (a static-embedding tower) or none is found.
    """
    from care.models.prune import find_layers

    inner: Any = model
    if hasattr(model, "_first_module"):  # a SentenceTransformer: its first module holds the Hugging Face model
        inner = model[0]
    if getattr(inner, "auto_model", None) is not None:
        inner = inner.auto_model
    try:
        return find_layers(inner)[1]
    except CareError as exc:
        raise LayerDistillError(f"{exc}. Layer-wise distillation needs a tower with transformer layers (not a "
                                "static-embedding one: use the output alignment alone)") from None


def projections(layer: nn.Module) -> tuple[nn.Module, nn.Module, nn.Module]:
    """The query, key and value projections of one transformer block (see :data:`PROJECTION_NAMES`)."""
    modules = dict(layer.named_modules())
    for names in PROJECTION_NAMES:
        found = [next((m for key, m in modules.items() if key.split(".")[-1] == name), None) for name in names]
        if all(isinstance(m, nn.Linear) for m in found):
            return found[0], found[1], found[2]
    raise LayerDistillError(f"no query/key/value projections found in {type(layer).__name__}")


def layer_map(student_layers: int, teacher_layers: int) -> list[tuple[int, int]]:
    """TinyBERT's uniform map ``[(k, round(k · N / L))]`` for student outputs ``k = 1..L`` (1-based layer outputs).

    The student's last layer always meets the teacher's last, whose output the stage's output alignment targets too
    (``L = 1``: only that pair); a strided cut was copied from layers ``0, s, 2s, ...``, one below each target.
    """
    if student_layers < 1 or teacher_layers < student_layers:
        raise LayerDistillError(f"cannot map {student_layers} student layers onto {teacher_layers} teacher layers")
    return [(k, max(1, round(k * teacher_layers / student_layers))) for k in range(1, student_layers + 1)]


@dataclass
class Taps:
    """What one forward pass exposed: each layer's output ``[B, T, d]`` (1-based) and the tapped layer's Q, K, V."""

    hidden: dict[int, torch.Tensor] = field(default_factory=dict)
    qkv: dict[str, torch.Tensor] = field(default_factory=dict)


@contextlib.contextmanager
def tap(model: nn.Module, *, hidden: bool, relation_layer: int | None) -> Iterator[Taps]:
    """Forward hooks on ``model``'s layers while the block runs; yields the :class:`Taps` they fill.

    ``relation_layer`` (1-based) is the block whose query / key / value projections are kept (``None``: none).
    """
    layers = transformer_layers(model)
    taps = Taps()
    handles = []

    def keep_output(index: int):
        def hook(_module, _inputs, output):
            taps.hidden[index] = output[0] if isinstance(output, (tuple, list)) else output
        return hook

    def keep_projection(name: str):
        def hook(_module, _inputs, output):
            taps.qkv[name] = output
        return hook

    try:
        if hidden:
            handles += [layer.register_forward_hook(keep_output(i)) for i, layer in enumerate(layers, start=1)]
        if relation_layer is not None:
            for name, module in zip("qkv", projections(layers[relation_layer - 1])):
                handles.append(module.register_forward_hook(keep_projection(name)))
        yield taps
    finally:
        for handle in handles:
            handle.remove()


def _token_mask(attention_mask: torch.Tensor) -> torch.Tensor:
    return attention_mask.to(torch.bool)


def hidden_state_loss(student: Mapping[int, torch.Tensor], teacher: Mapping[int, torch.Tensor],
                      pairs: list[tuple[int, int]], attention_mask: torch.Tensor) -> torch.Tensor:
    """``1/|pairs| · Σ_(k, m) mean over non-padding tokens of ‖h_s^k − h_t^m‖² / d`` (TinyBERT's hidden-state MSE)."""
    mask = _token_mask(attention_mask)
    total = attention_mask.new_zeros((), dtype=torch.float32)
    for k, m in pairs:
        s, t = student[k], teacher[m].to(student[k].dtype)
        if s.shape[-1] != t.shape[-1]:
            raise LayerDistillError(f"hidden widths differ (student {s.shape[-1]}, teacher {t.shape[-1]}): the "
                                    "hidden-state term needs a cut of the teacher; use lambda_relations alone")
        total = total + ((s - t) ** 2).mean(dim=-1)[mask].mean()
    return total / len(pairs)


def relation_log_probs(x: torch.Tensor, attention_mask: torch.Tensor, heads: int) -> torch.Tensor:
    """``log softmax(X_r X_rᵀ / √d_r)`` over key tokens ``[B, R, T, T]``, padding keys masked out."""
    batch, length, width = x.shape
    if width % heads:
        raise LayerDistillError(f"relation_heads={heads} does not divide the projection width {width}")
    xr = x.float().view(batch, length, heads, width // heads).transpose(1, 2)
    scores = xr @ xr.transpose(-1, -2) / math.sqrt(width // heads)
    keys = _token_mask(attention_mask)[:, None, None, :]
    return torch.log_softmax(scores.masked_fill(~keys, torch.finfo(scores.dtype).min), dim=-1)


def relation_loss(student: Mapping[str, torch.Tensor], teacher: Mapping[str, torch.Tensor],
                  attention_mask: torch.Tensor, heads: int) -> torch.Tensor:
    """MiniLM v2's ``1/3 Σ_{X ∈ Q,K,V} mean_{r, t} KL(A_X^teacher(t) ‖ A_X^student(t))`` over non-padding query tokens."""
    mask = _token_mask(attention_mask)[:, None, :].expand(-1, heads, -1)
    keys = _token_mask(attention_mask)[:, None, None, :]
    total = attention_mask.new_zeros((), dtype=torch.float32)
    for name in "qkv":
        log_s = relation_log_probs(student[name], attention_mask, heads)
        log_t = relation_log_probs(teacher[name], attention_mask, heads)
        kl = (log_t.exp() * (log_t - log_s)).masked_fill(~keys, 0.0).sum(dim=-1)  # [B, R, T]
        total = total + kl[mask].mean()
    return total / 3


@dataclass(frozen=True)
class LayerDistillSettings:
    """Weights and shape of the two terms (from :class:`care.train.engine.config.LossConfig`)."""

    lambda_hidden: float = 0.0
    lambda_relations: float = 0.0
    relation_heads: int = 12
    relation_layer: int | None = None  # the teacher's block (1-based); None: its last

    @property
    def active(self) -> bool:
        return self.lambda_hidden > 0 or self.lambda_relations > 0


class LayerDistiller:
    """Holds the frozen teacher and computes the layer terms for one batch of the query tower.

    Usage in a training step::

        with distiller.student_taps(student) as taps:
            embeddings = student(features)          # the usual forward, unchanged
        terms = distiller.terms(taps, features)     # {"hidden": ..., "relations": ...} (the active ones)

    Args:
        teacher: the teacher's Hugging Face model (or a SentenceTransformer), frozen here.
        student: the query tower (to count its layers and check widths).
        settings: :class:`LayerDistillSettings`.
    """

    def __init__(self, teacher: nn.Module, student: nn.Module, settings: LayerDistillSettings) -> None:
        if not settings.active:
            raise ValueError("LayerDistiller needs lambda_hidden or lambda_relations > 0")
        self.settings = settings
        self.teacher = teacher.eval().requires_grad_(False)
        n_teacher, n_student = len(transformer_layers(teacher)), len(transformer_layers(student))
        self.pairs = layer_map(n_student, n_teacher)
        self.teacher_relation_layer = settings.relation_layer or n_teacher
        if not 1 <= self.teacher_relation_layer <= n_teacher:
            raise LayerDistillError(f"relation_layer={settings.relation_layer}: the teacher has {n_teacher} layers")
        self.student_layers = n_student
        self._checked_ids = False

    def student_taps(self, student: nn.Module):
        """Hooks on the student while its forward runs (hidden states of every layer, Q/K/V of its last)."""
        return tap(student, hidden=self.settings.lambda_hidden > 0,
                   relation_layer=self.student_layers if self.settings.lambda_relations > 0 else None)

    def _teacher_inputs(self, features: Mapping[str, Any]) -> dict[str, torch.Tensor]:
        ids = features["input_ids"]
        vocab = self.teacher.get_input_embeddings().num_embeddings
        if not self._checked_ids and int(ids.max()) >= vocab:
            raise LayerDistillError(f"the student's token ids reach {int(ids.max())} but the teacher's vocabulary has "
                                    f"{vocab} rows: layer-wise distillation needs the teacher's tokenizer")
        self._checked_ids = True
        keep = {"input_ids", "attention_mask", "token_type_ids"}
        return {k: v for k, v in features.items() if k in keep and isinstance(v, torch.Tensor)}

    @torch.no_grad()
    def teacher_taps(self, features: Mapping[str, Any]) -> Taps:
        """Run the frozen teacher on the student's token ids and keep the layers the terms read."""
        device = features["input_ids"].device
        if next(self.teacher.parameters()).device != device:
            self.teacher.to(device)
        with tap(self.teacher, hidden=self.settings.lambda_hidden > 0,
                 relation_layer=self.teacher_relation_layer if self.settings.lambda_relations > 0 else None) as taps:
            self.teacher(**self._teacher_inputs(features))
        return taps

    def terms(self, student: Taps, features: Mapping[str, Any]) -> dict[str, tuple[float, torch.Tensor]]:
        """``{name: (weight, unweighted value)}`` of the active terms for the batch the student just encoded."""
        teacher = self.teacher_taps(features)
        mask = features["attention_mask"]
        out: dict[str, tuple[float, torch.Tensor]] = {}
        if self.settings.lambda_hidden > 0:
            out[HIDDEN] = (self.settings.lambda_hidden, hidden_state_loss(student.hidden, teacher.hidden,
                                                                          self.pairs, mask))
        if self.settings.lambda_relations > 0:
            out[RELATIONS] = (self.settings.lambda_relations,
                              relation_loss(student.qkv, teacher.qkv, mask, self.settings.relation_heads))
        return out


def load_layer_teacher(path: str, *, trust_remote_code: bool = False) -> nn.Module:
    """The teacher's Hugging Face model from a plain checkpoint or a SentenceTransformer folder (its first module)."""
    from pathlib import Path

    from transformers import AutoModel

    folder = Path(path)
    if (folder / "modules.json").is_file():
        from sentence_transformers import SentenceTransformer

        return SentenceTransformer(str(folder), device="cpu", trust_remote_code=trust_remote_code)[0].auto_model
    if not (folder / "config.json").is_file():
        raise LayerDistillError(f"layer teacher {path!r}: no config.json or modules.json there; set model.layer_teacher "
                                "to the folder of the deep model the query tower was cut from")
    return AutoModel.from_pretrained(str(folder), trust_remote_code=trust_remote_code)
