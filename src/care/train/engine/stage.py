"""A training stage at run time: which tower encodes each batch field, the loss, the teacher's texts.

Each stage's routing and loss are declared in :mod:`care.train.engine.stage_catalog`;
:func:`build_stage` turns a declaration and a config's loss settings into a :class:`StageSpec`.

The teacher embeds a query *as a query, by its own convention*: a CARE document tower
(:class:`~care.train.engine.teacher.TowerEncoder`, a symmetric LLM embedder) sees exactly the text the student
sees (``model.query_prompt`` / the row's instruction applied); any other :class:`~care.encoders.base.Encoder`
(e5: ``"query: "`` prefix) gets ``encode_queries(query, instruction=row prompt)``. Inside the teacher
cache such texts are tagged (:func:`teacher_query_key`) so they never collide with documents.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import torch
from torch import nn

from care.errors import CareError
from care.train.engine.config import TrainConfig
from care.train.engine.stage_catalog import (
    DOCUMENT_TOWER,
    FIELDS,
    QUERY_TOWER,
    TEACHER,
    TEACHER_FIELD_SOURCES,
    stage_declaration,
)

__all__ = ["DOCUMENT_TOWER", "FIELDS", "QUERY_TOWER", "TEACHER", "QueryAwareTeacher", "StageSpec", "build_stage",
           "parse_teacher_query_key", "source_field", "teacher_query_key"]


def source_field(name: str) -> str:
    """The batch field (query / positive / negative) whose texts the field ``name`` encodes."""
    return TEACHER_FIELD_SOURCES.get(name, name)


#: Prefix of a teacher-cache key that stands for a query (not a document text).
QUERY_KEY_PREFIX = "\x1ecare-teacher-query\x1f"


def teacher_query_key(query: str, prompt: str | None, type_: str | None) -> str:
    """The teacher-cache key of a query embedded as a query (raw text, the row's prompt and type)."""
    return QUERY_KEY_PREFIX + json.dumps([prompt, type_, query], ensure_ascii=False)


def parse_teacher_query_key(key: str) -> tuple[str, str | None, str | None] | None:
    """``(query, prompt, type)`` of a :func:`teacher_query_key`, or ``None`` for a document text."""
    if not key.startswith(QUERY_KEY_PREFIX):
        return None
    prompt, type_, query = json.loads(key[len(QUERY_KEY_PREFIX):])
    return query, prompt, type_


class QueryAwareTeacher:
    """An :class:`~care.encoders.base.Encoder` view of a teacher whose ``encode_documents`` also embeds
    query keys (:func:`teacher_query_key`) as queries, so one cache holds both (see the module docstring).

    Args:
        teacher: the frozen teacher.
        default_prompt: ``model.query_prompt`` (what the student prefixes to queries without a prompt).
    """

    def __init__(self, teacher, default_prompt: str | None) -> None:
        from care.hashes import SHA1, hex_digest
        from care.train.engine.teacher import TowerEncoder

        self.teacher = teacher
        self.default_prompt = default_prompt
        self.symmetric = isinstance(teacher, TowerEncoder)
        self.name = teacher.name
        digest = hex_digest(repr(default_prompt), algorithm=SHA1, length=8)
        self._fingerprint = f"{teacher.fingerprint}+queries:{digest}"

    @property
    def fingerprint(self) -> str:
        return self._fingerprint

    @property
    def dim(self) -> int:
        return self.teacher.dim

    def encode_queries(self, texts, **kwargs) -> np.ndarray:
        return self.teacher.encode_queries(texts, **kwargs)

    def _encode_queries(self, parsed: list[tuple[str, str | None, str | None]], batch_size: int) -> np.ndarray:
        from care.train.engine.batches import query_text

        if self.symmetric:
            texts = [query_text(q, p, t, self.default_prompt) for q, p, t in parsed]
            return self.teacher.encode_texts(texts, batch_size=batch_size)
        out: list[np.ndarray | None] = [None] * len(parsed)
        for prompt in {p for _, p, _ in parsed}:
            rows = [i for i, (_, p, _) in enumerate(parsed) if p == prompt]
            vecs = self.teacher.encode_queries([parsed[i][0] for i in rows], instruction=prompt, batch_size=batch_size)
            for i, vec in zip(rows, vecs):
                out[i] = vec
        return np.stack(out)

    def encode_documents(self, texts, *, batch_size: int = 32, show_progress: bool = False) -> np.ndarray:
        texts = list(texts)
        parsed = [parse_teacher_query_key(t) for t in texts]
        queries = [i for i, p in enumerate(parsed) if p is not None]
        documents = [i for i, p in enumerate(parsed) if p is None]
        out: list[np.ndarray | None] = [None] * len(texts)
        if documents:
            vecs = self.teacher.encode_documents([texts[i] for i in documents], batch_size=batch_size,
                                                 show_progress=show_progress)
            for i, vec in zip(documents, vecs):
                out[i] = vec
        if queries:
            for i, vec in zip(queries, self._encode_queries([parsed[i] for i in queries], batch_size)):
                out[i] = vec
        return np.stack(out).astype(np.float32)


@dataclass
class StageSpec:
    """One stage: field → tower routing plus the loss.

    Attributes:
        name: stage name (see :data:`care.train.engine.stage_catalog.STAGES`).
        field_towers: ``{field: "query" | "document" | "teacher"}``.
        loss: ``nn.Module`` called with the embeddings of ``loss_args`` in order (by default
            ``loss(query [B,d], positive [B,d], negatives [B,k,d] | None)``; any field whose source is
            ``negative`` is reshaped to ``[B, k, d]``); returns a tensor or a
            :class:`~care.train.engine.losses.LossOutput`.
        loss_args: field names passed positionally to ``loss``.
        query_side_as_queries: the teacher embeds the positive and negatives of ``query_align`` rows
            as queries (``model.teacher.query_side_as_queries``; Stage I).
        candidate_bank: the loss scores queries against the teacher's vectors of every document of the
            training file (:meth:`bank_texts`, set with :meth:`set_candidate_bank`).
    """

    name: str
    field_towers: dict[str, str]
    loss: nn.Module
    loss_args: tuple[str, ...] = field(default=FIELDS)
    query_side_as_queries: bool = False
    candidate_bank: bool = False

    @property
    def trainable_towers(self) -> tuple[str, ...]:
        """Towers that receive gradients (the teacher never does)."""
        return tuple(t for t in (QUERY_TOWER, DOCUMENT_TOWER) if t in self.field_towers.values())

    @property
    def uses_teacher(self) -> bool:
        return TEACHER in self.field_towers.values()

    @property
    def teacher_scores_only(self) -> bool:
        """True when the teacher's vectors only meet each other (``score_distill``, ``stage2_distill``: the
        student encodes its own candidates): the teacher's width is free, and the student is not paired with
        it as a CARE model."""
        return self.uses_teacher and self.field_towers.get("positive") in (QUERY_TOWER, DOCUMENT_TOWER)

    @property
    def teacher_embeds_queries(self) -> bool:
        """True when the teacher must embed queries (a ``teacher_query`` field, or query-side rows as queries)."""
        return self.field_towers.get("teacher_query") == TEACHER or self.query_side_as_queries

    def _teacher_side(self, texts: list[str], prompts: Sequence[str | None], types: Sequence[str | None]) -> list[str]:
        """``texts`` of the teacher's positive/negative fields (row-major: ``len(texts) // len(types)`` per
        row), with query-side rows' texts as query keys when :attr:`query_side_as_queries`."""
        if not self.query_side_as_queries:
            return texts
        from care.data.training import QUERY_ALIGN

        per_row = max(len(texts) // max(len(types), 1), 1)
        return [teacher_query_key(t, prompts[i // per_row], types[i // per_row]) if types[i // per_row] == QUERY_ALIGN
                else t for i, t in enumerate(texts)]

    def teacher_encoder(self, teacher, default_prompt: str | None):
        """The encoder whose ``encode_documents`` fills the teacher cache: ``teacher`` itself, or a
        :class:`QueryAwareTeacher` around it when the stage needs the teacher's query vectors."""
        return QueryAwareTeacher(teacher, default_prompt) if self.teacher_embeds_queries else teacher

    def batch_texts(self, batch, default_prompt: str | None, document_prompt: str | None = None) -> dict[str, list[str]]:
        """``{field: texts}`` of every field this stage encodes for a :class:`~care.train.engine.data.TrainingBatch`
        (a field whose texts are empty, e.g. no negatives, is left out). The student's queries get their
        instruction (:func:`care.train.engine.batches.batch_queries`); positives and negatives encoded by a
        trained tower get ``document_prompt`` (a teacher applies its own convention: its cache holds
        the raw texts); ``teacher_query`` holds query keys."""
        from care.train.engine.batches import batch_queries

        texts = {"query": batch_queries(batch, default_prompt), "positive": list(batch.positives),
                 "negative": list(batch.negatives),
                 "teacher_query": [teacher_query_key(q, p, t) for q, p, t in zip(batch.queries, batch.prompts,
                                                                                 batch.types)]}
        out = {}
        for name, tower in self.field_towers.items():
            key = name if name == "teacher_query" else source_field(name)
            if not texts[key]:
                continue
            value = texts[key]
            if tower == TEACHER and key in ("positive", "negative"):  # negatives are query-major
                value = self._teacher_side(value, batch.prompts, batch.types)
            elif document_prompt and key in ("positive", "negative"):
                value = [document_prompt + t for t in value]
            out[name] = value
        return out

    def teacher_texts(self, examples: Iterable, query_prompt: str | None, bank: Iterable[str] = ()) -> list[str]:
        """Every distinct text the frozen teacher must embed for ``examples`` and the candidate ``bank``
        (:meth:`bank_texts`; candidate-bank stages) (sorted).

        ``positive``/``negative`` teacher fields need all of a row's ``pos`` and ``neg`` (the hard
        negatives are sampled per epoch); a ``query`` teacher field needs each row's query, as a query
        key (:func:`teacher_query_key`; embedded by :class:`QueryAwareTeacher`, which applies
        ``query_prompt`` for a symmetric teacher).
        """
        sources = {source_field(n) for n, tower in self.field_towers.items() if tower == TEACHER}
        texts: set[str] = set(bank)
        for ex in examples:
            if sources & {"positive", "negative"}:
                texts.update(self._teacher_side([*ex.pos, *ex.neg], [ex.prompt], [ex.type]))
            if "query" in sources:
                texts.add(teacher_query_key(ex.query, ex.prompt, ex.type))
        return sorted(texts)

    def bank_texts(self, examples: Iterable, size: int | None, seed: int, bank_file: str | None = None) -> list[str]:
        """The documents of the candidate bank (sorted): every distinct ``pos`` and ``neg`` text of
        ``examples`` — or of ``bank_file`` (a corpus or training JSONL, :mod:`care.train.engine.bank`) when
        given — or a seeded random ``size`` of them."""
        import random

        from care.train.engine.bank import bank_file_documents, example_documents

        texts = sorted(bank_file_documents(bank_file) if bank_file else example_documents(examples))
        if size is not None and size < len(texts):
            texts = sorted(random.Random(seed).sample(texts, size))
        return texts

    def set_candidate_bank(self, bank: torch.Tensor) -> None:
        """Hand the bank (``[N, d]`` frozen teacher vectors) to the loss."""
        if not self.candidate_bank:
            raise CareError(f"stage {self.name} does not use a candidate bank")
        self.loss.set_bank(bank)

    def compute_loss(self, embeddings: Mapping[str, torch.Tensor], n_negatives: int):
        """Apply the loss to ``{field: embeddings}``; negatives ``[B·k, d]`` are reshaped to ``[B, k, d]``."""
        batch = embeddings["query"].shape[0]
        args = []
        for name in self.loss_args:
            value = embeddings.get(name)
            if source_field(name) == "negative":
                value = value.reshape(batch, n_negatives, value.shape[-1]) if value is not None and n_negatives > 0 \
                    else None
            args.append(value)
        return self.loss(*args)


def build_stage(config: TrainConfig) -> StageSpec:
    """The :class:`StageSpec` of ``config.stage``: its declared routing, with its loss built from ``config.loss``."""
    declared = stage_declaration(config.stage)
    return StageSpec(config.stage, dict(declared.field_towers), declared.loss(config.loss), declared.loss_args,
                     query_side_as_queries=declared.teacher_embeds_query_side
                     and config.model.teacher.query_side_as_queries, candidate_bank=declared.candidate_bank)
