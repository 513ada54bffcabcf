"""Judge configuration: one entry per judge, loaded from YAML or JSON.

Example (``judges.yaml``)::

    cache: judgments.sqlite            # relative to this file
    judges:
      - id: qwen-max
        kind: openai
        base_url: https://dashscope.aliyuncs.com/compatible-mode/v1
        model: qwen-max
        api_key_env: DASHSCOPE_API_KEY   # the key is read from this environment variable
        price_input_per_million: 2.4
        price_output_per_million: 9.6
      - id: e5-offline
        kind: embedding
        encoder: e5
        thresholds: {S: 0.90, A: 0.86, B: 0.82, C: 0.78}
    voting:
      positive_grades: [S, A]
      negative_grades: [C, D]
      scores: {S: 3, A: 2, B: 1, C: 0, D: 0}
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

import yaml

from care.curate.judges.base import GRADES
from care.curate.judges.prompt import DEFAULT_PROMPT
from care.curate.voting import VotingConfig
from care.errors import CareError

JUDGE_KINDS = ("openai", "embedding")
DEFAULT_THRESHOLDS = {"S": 0.90, "A": 0.86, "B": 0.82, "C": 0.78}


@dataclass
class JudgeConfig:
    """One judge.

    Attributes (``openai`` kind): ``base_url``, ``model``, ``api_key_env`` (environment variable
    holding the key; None for servers without auth), ``prompt`` (packaged template name or path),
    ``passages_per_call``, ``max_concurrency``, ``timeout_s`` (per request), ``max_retries`` (on
    timeouts / 429 / 5xx), ``backoff_base_s`` / ``backoff_max_s`` (exponential backoff; a server's
    Retry-After wins, capped at ``retry_after_max_s``), ``max_reasks`` (re-asking for passages
    missing from a reply), ``temperature``, ``max_tokens``, prices in USD (or any currency) per
    million input / output tokens.
    Attributes (``embedding`` kind): ``encoder`` (spec for ``care.encoders.registry.load_model``),
    ``thresholds`` (minimum cosine similarity per grade S/A/B/C; below C is D), ``instruction``.
    """

    id: str
    kind: str = "openai"
    base_url: str | None = None
    model: str | None = None
    api_key_env: str | None = None
    prompt: str = DEFAULT_PROMPT
    passages_per_call: int = 5
    max_concurrency: int = 8
    timeout_s: float = 60.0
    max_retries: int = 6
    backoff_base_s: float = 1.0
    backoff_max_s: float = 60.0
    retry_after_max_s: float = 300.0
    max_reasks: int = 3
    temperature: float = 0.0
    max_tokens: int = 512
    price_input_per_million: float = 0.0
    price_output_per_million: float = 0.0
    encoder: str | None = None
    thresholds: dict[str, float] = field(default_factory=lambda: dict(DEFAULT_THRESHOLDS))
    instruction: str | None = None

    def __post_init__(self) -> None:
        if self.kind not in JUDGE_KINDS:
            raise CareError(f"judge {self.id!r}: unknown kind {self.kind!r} (use one of {', '.join(JUDGE_KINDS)})")
        if self.kind == "openai" and not (self.base_url and self.model):
            raise CareError(f"judge {self.id!r}: an openai judge needs base_url and model")
        if self.kind == "embedding" and not self.encoder:
            raise CareError(f"judge {self.id!r}: an embedding judge needs encoder (e.g. e5)")
        if self.passages_per_call < 1 or self.max_concurrency < 1:
            raise CareError(f"judge {self.id!r}: passages_per_call and max_concurrency must be >= 1")
        bad = set(self.thresholds) - set(GRADES[:-1])
        if bad:
            raise CareError(f"judge {self.id!r}: thresholds for unknown grades {sorted(bad)} (use S, A, B, C)")


@dataclass
class JudgesConfig:
    """All judges of a run, the cache file and the voting rule."""

    judges: list[JudgeConfig]
    cache: str = "judgments.sqlite"
    voting: VotingConfig = field(default_factory=VotingConfig)

    @classmethod
    def from_dict(cls, data: dict[str, Any], base_dir: str | Path = ".") -> JudgesConfig:
        if not isinstance(data, dict) or not isinstance(data.get("judges"), list) or not data["judges"]:
            raise CareError("judges config: needs a non-empty 'judges' list")
        known = {f.name for f in fields(JudgeConfig)}
        judges = []
        for i, entry in enumerate(data["judges"]):
            unknown = set(entry) - known
            if unknown:
                raise CareError(f"judges config: judge {i} has unknown fields {sorted(unknown)}; known: {sorted(known)}")
            judges.append(JudgeConfig(**entry))
        ids = [j.id for j in judges]
        if len(set(ids)) != len(ids):
            raise CareError(f"judges config: judge ids must be unique, got {ids}")
        cache = Path(data.get("cache", "judgments.sqlite"))
        if not cache.is_absolute():
            cache = Path(base_dir) / cache
        voting = VotingConfig.from_dict(data.get("voting", {}))
        return cls(judges, str(cache), voting)

    @classmethod
    def load(cls, path: str | Path) -> JudgesConfig:
        """Load a YAML (``.yaml``/``.yml``) or JSON file; a relative cache path is relative to it."""
        path = Path(path)
        if not path.is_file():
            raise CareError(f"judges config {path} not found")
        text = path.read_text(encoding="utf-8")
        data = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
        return cls.from_dict(data, path.parent)

    def to_dict(self) -> dict[str, Any]:
        return {"cache": self.cache, "judges": [asdict(j) for j in self.judges], "voting": self.voting.to_dict()}
