"""The versioned judging prompt (``care/curate/resources/judge_prompt_v*.yaml``) and its hash."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from string import Template

import yaml

from care.errors import CareError
from care.hashes import hex_digest

DEFAULT_PROMPT = "judge_prompt_v1.yaml"
_WHITESPACE = re.compile(r"\s+")


@dataclass(frozen=True)
class JudgePrompt:
    """A chat prompt with ``$query``, ``$passages`` and ``$count`` placeholders.

    Passages are numbered from 1 and flattened to one line each (``[3] text``), which is what the
    reply's ``id`` field refers to.
    """

    system: str
    user: str
    passage_format: str
    source: str

    @classmethod
    def load(cls, name_or_path: str = DEFAULT_PROMPT) -> JudgePrompt:
        """Load a packaged template by file name, or any YAML file by path."""
        path = Path(name_or_path)
        if path.is_file():
            text = path.read_text(encoding="utf-8")
        else:
            res = resources.files("care.curate.resources").joinpath(name_or_path)
            if not res.is_file():
                raise CareError(f"judge prompt {name_or_path!r} not found (a path or a packaged name like {DEFAULT_PROMPT})")
            text = res.read_text(encoding="utf-8")
        data = yaml.safe_load(text)
        missing = [k for k in ("system", "user", "passage_format") if k not in (data or {})]
        if missing:
            raise CareError(f"judge prompt {name_or_path}: missing keys {missing}")
        return cls(data["system"], data["user"], data["passage_format"], text)

    @property
    def hash(self) -> str:
        """SHA-256 of the template content (first 16 hex digits): part of every cache key."""
        return hex_digest(self.source, length=16)

    def messages(self, query: str, passages: Sequence[str]) -> list[dict[str, str]]:
        """The chat messages for one call."""
        lines = [
            Template(self.passage_format).substitute(index=i, text=_WHITESPACE.sub(" ", p).strip())
            for i, p in enumerate(passages, start=1)
        ]
        user = Template(self.user).substitute(
            query=_WHITESPACE.sub(" ", query).strip(), passages="\n".join(lines), count=len(passages),
        )
        return [{"role": "system", "content": self.system}, {"role": "user", "content": user}]
