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

from care.config import check_field_types
from care.curate.judges.base import GRADES
from care.curate.judges.prompt import DEFAULT_PROMPT
from care.curate.judges.voting import VotingConfig
from care.errors import CareError

JUDGE_KINDS = ("openai", "embedding")
DEFAULT_THRESHOLDS = {"S": 0.90, "A": 0.86, "B": 0.82, "C": 0.78}
TOP_LEVEL_FIELDS = frozenset({"cache", "judges", "voting"})


def read_config_mapping(path: Path, what: str) -> dict[str, Any]:
    """The mapping in a YAML or JSON file (JSON when the suffix is ``.json``).

    Raises:
        CareError: the file is missing, not UTF-8, not valid YAML / JSON (line and column named), or
            holds something other than a mapping.
    """
    if not path.is_file():
        raise CareError(f"{what} {path} not found")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise CareError(f"{path}: not UTF-8 text (byte {exc.start}); save the {what} as UTF-8") from None
    if path.suffix.lower() == ".json":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise CareError(f"{path}: not valid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}") from None
    else:
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
            problem = getattr(exc, "problem", None) or str(exc)
            raise CareError(f"{path}: not valid YAML{where}: {problem}") from None
    if not isinstance(data, dict):
        raise CareError(f"{path}: expected a mapping of {what} fields at the top level, got {type(data).__name__}")
    return data


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
        if not isinstance(self.thresholds, dict) or not all(
                isinstance(v, (int, float)) and not isinstance(v, bool) for v in self.thresholds.values()):
            raise CareError(f"judge {self.id!r}: thresholds must map grades to numbers, e.g. {{S: 0.9, A: 0.86}}")
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
    def from_dict(cls, data: dict[str, Any], base_dir: str | Path = ".", *, source: str = "judges config") -> JudgesConfig:
        """Build from parsed YAML / JSON; every error names ``source`` (the file), the judge and the field."""
        if not isinstance(data, dict) or not isinstance(data.get("judges"), list) or not data["judges"]:
            raise CareError(f"{source}: needs a non-empty 'judges' list (see docs/curate.md, judges config)")
        unknown_top = set(data) - TOP_LEVEL_FIELDS
        if unknown_top:
            raise CareError(f"{source}: unknown top-level field(s) {sorted(unknown_top)}; known: {sorted(TOP_LEVEL_FIELDS)}")
        known = {f.name for f in fields(JudgeConfig)}
        judges = []
        for i, entry in enumerate(data["judges"]):
            where = f"{source}, judges[{i}]"
            if not isinstance(entry, dict):
                raise CareError(f"{where}: expected a mapping of judge fields (id, kind, base_url, ...), "
                                f"got {type(entry).__name__}")
            if isinstance(entry.get("id"), str):
                where += f" (id {entry['id']!r})"
            unknown = set(entry) - known
            if unknown:
                raise CareError(f"{where}: unknown field(s) {sorted(unknown)}; known: {sorted(known)}")
            check_field_types(JudgeConfig, entry, where)
            try:
                judges.append(JudgeConfig(**entry))
            except TypeError as exc:  # a required field is missing
                raise CareError(f"{where}: {exc}; every judge needs an 'id'") from None
            except CareError as exc:
                raise CareError(f"{source}: {exc}") from None
        ids = [j.id for j in judges]
        if len(set(ids)) != len(ids):
            raise CareError(f"{source}: judge ids must be unique, got {ids}")
        cache_value = data.get("cache", "judgments.sqlite")
        if not isinstance(cache_value, str) or not cache_value.strip():
            raise CareError(f"{source}, field 'cache': expected a file path string, got {cache_value!r}")
        cache = Path(cache_value)
        if not cache.is_absolute():
            cache = Path(base_dir) / cache
        voting_data = data.get("voting") or {}
        if not isinstance(voting_data, dict):
            raise CareError(f"{source}, field 'voting': expected a mapping, got {type(voting_data).__name__}")
        unknown_voting = set(voting_data) - {f.name for f in fields(VotingConfig)}
        if unknown_voting:
            raise CareError(f"{source}, voting: unknown field(s) {sorted(unknown_voting)}; "
                            f"known: {sorted(f.name for f in fields(VotingConfig))}")
        check_field_types(VotingConfig, voting_data, f"{source}, voting")
        try:
            voting = VotingConfig.from_dict(voting_data)
        except CareError as exc:
            raise CareError(f"{source}: {exc}") from None
        return cls(judges, str(cache), voting)

    @classmethod
    def load(cls, path: str | Path) -> JudgesConfig:
        """Load a YAML (``.yaml``/``.yml``) or JSON file; a relative cache path is relative to it.

        Raises:
            CareError: a missing file, a syntax error (with its line and column), an unknown field
                or a value of the wrong type — naming the file, the judge and the field.
        """
        path = Path(path)
        return cls.from_dict(read_config_mapping(path, "judges config"), path.parent, source=str(path))

    def to_dict(self) -> dict[str, Any]:
        return {"cache": self.cache, "judges": [asdict(j) for j in self.judges], "voting": self.voting.to_dict()}
