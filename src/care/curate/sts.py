"""``build-sts``: synonym STS pairs generated from a medical synonym dictionary and an LLM.

For each query that contains a dictionary term, the LLM writes (prompt
``resources/sts_prompt_v1.yaml``):

- a **positive**: the term swapped for a synonym, same intent (score ``scores["positive"]``);
- a **hard negative**: the term swapped for the synonym, intent changed (``scores["hard_negative"]``);
- an **easy negative**: no swap, intent changed (``scores["easy_negative"]``).

The paper's checks keep a generated sentence only when the swap really happened (the synonym is
present in the positive and the hard negative; the easy negative keeps the original term and does
not contain the synonym) and its length is within ±30% of the query's (of the query with the
term swapped, for the two swapped sentences). A query whose generation
fails the checks is asked again (up to ``max_attempts``). Every reply is cached in SQLite keyed by
(LLM id, prompt hash, query, term, synonym, attempt), so a rerun after a crash costs nothing for
finished queries; the STS file is written atomically at the end.
"""

from __future__ import annotations

import json
import logging
import random
import re
import sqlite3
import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field, fields
from importlib import resources
from pathlib import Path
from string import Template
from typing import Any

import yaml
from tqdm import tqdm

from care.config import check_field_types
from care.curate.judges.config import JudgeConfig, read_config_mapping
from care.curate.judges.openai_judge import ChatClient
from care.data.errors import DataFormatError
from care.data.io import iter_text_lines, write_json, write_jsonl
from care.data.retrieval import load_queries
from care.errors import CareError
from care.hashes import hex_digest

logger = logging.getLogger(__name__)

DEFAULT_STS_PROMPT = "sts_prompt_v1.yaml"
_SEPARATORS = re.compile(r"[\t,，、;；|/ ]+")
KINDS = ("positive", "hard_negative", "easy_negative")


@dataclass
class StsConfig:
    """Settings of :func:`build_sts`.

    Attributes:
        length_tolerance: allowed relative length difference to the query (paper: 0.3).
        max_attempts: generations tried per query before giving up on it.
        scores: gold score written for each kind of pair.
        prompt: packaged template name or a path.
        seed: picks the synonym when a term has several.
        concurrency: parallel LLM calls.
    """

    length_tolerance: float = 0.3
    max_attempts: int = 2
    scores: dict[str, float] = field(default_factory=lambda: {"positive": 1.0, "hard_negative": 0.0, "easy_negative": 0.0})
    prompt: str = DEFAULT_STS_PROMPT
    seed: int = 0
    concurrency: int = 8


def load_synonyms(path: str | Path) -> dict[str, list[str]]:
    """``{term: [synonyms]}`` from a file with one synonym group per line (terms separated by tabs,
    commas, 、, spaces or |; ``#`` starts a comment line)."""
    path = Path(path)
    groups: dict[str, list[str]] = {}
    for line, text in iter_text_lines(path):
        if not text.strip() or text.lstrip().startswith("#"):
            continue
        terms = list(dict.fromkeys(t for t in _SEPARATORS.split(text.strip()) if t))
        if len(terms) < 2:
            raise DataFormatError(path, f"a synonym group needs at least two terms, got {terms}", line=line,
                                  hint="write synonyms on one line separated by tabs or commas")
        for term in terms:
            groups.setdefault(term, [])
            groups[term].extend(t for t in terms if t != term and t not in groups[term])
    if not groups:
        raise DataFormatError(path, "no synonym groups")
    return groups


def load_llm_config(path: str | Path) -> JudgeConfig:
    """An LLM connection (the :class:`JudgeConfig` fields of an ``openai`` judge) from YAML/JSON."""
    path = Path(path)
    data = read_config_mapping(path, "LLM config")
    known = {f.name for f in fields(JudgeConfig)}
    if set(data) - known:
        raise CareError(f"{path}: unknown field(s) {sorted(set(data) - known)}; known: {sorted(known)}")
    check_field_types(JudgeConfig, data, str(path))
    try:
        return JudgeConfig(**{"kind": "openai", **data})
    except TypeError as exc:
        raise CareError(f"{path}: {exc}; the LLM config needs id, base_url and model") from None


def find_term(query: str, synonyms: dict[str, list[str]]) -> str | None:
    """The longest dictionary term in ``query`` (earliest on ties), or None."""
    found = [t for t in synonyms if t in query]
    return max(found, key=lambda t: (len(t), -query.index(t))) if found else None


def check_generation(query: str, term: str, synonym: str, gen: dict[str, Any], tolerance: float) -> str | None:
    """The first failed check (a reason string), or None when all three sentences pass."""
    for kind in KINDS:
        if not isinstance(gen.get(kind), str) or not gen[kind].strip():
            return f"missing_{kind}"
    swapped_len = len(query) - len(term) + len(synonym)
    for kind in KINDS:
        reference = len(query) if kind == "easy_negative" else swapped_len  # a swap may change the length itself
        if abs(len(gen[kind]) - reference) > tolerance * reference:
            return f"length_{kind}"
    if synonym not in gen["positive"]:
        return "no_swap_positive"
    if synonym not in gen["hard_negative"]:
        return "no_swap_hard_negative"
    if synonym in gen["easy_negative"] or term not in gen["easy_negative"]:
        return "swapped_easy_negative"
    if gen["hard_negative"] == gen["positive"] or gen["easy_negative"] == query:
        return "intent_unchanged"
    return None


def _parse_object(reply: str) -> dict[str, Any]:
    decoder = json.JSONDecoder()
    for i, ch in enumerate(reply):
        if ch == "{":
            try:
                value, _ = decoder.raw_decode(reply, i)
            except json.JSONDecodeError:
                continue
            if isinstance(value, dict):
                return value
    return {}


class _GenerationCache:
    """SQLite ``key -> reply`` shared by the worker threads (one connection behind a lock)."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(path, timeout=60, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("CREATE TABLE IF NOT EXISTS generations (key TEXT PRIMARY KEY, reply TEXT NOT NULL)")

    def get(self, key: str) -> str | None:
        with self._lock:
            row = self._db.execute("SELECT reply FROM generations WHERE key=?", (key,)).fetchone()
        return row[0] if row else None

    def put(self, key: str, reply: str) -> None:
        with self._lock, self._db:
            self._db.execute("INSERT OR REPLACE INTO generations VALUES (?, ?)", (key, reply))

    def close(self) -> None:
        self._db.close()


def build_sts(
    queries_path: str | Path,
    synonyms_path: str | Path,
    llm: JudgeConfig | ChatClient,
    out_path: str | Path,
    *,
    cache_path: str | Path | None = None,
    config: StsConfig | None = None,
    show_progress: bool = True,
) -> dict[str, Any]:
    """Generate, check and write STS pairs; returns a report (also ``<out>.report.json``)."""
    config = config or StsConfig()
    client = llm if isinstance(llm, ChatClient) else ChatClient(llm)
    res = resources.files("care.curate.resources").joinpath(config.prompt)
    template_text = Path(config.prompt).read_text(encoding="utf-8") if Path(config.prompt).is_file() else res.read_text(encoding="utf-8")
    template = yaml.safe_load(template_text)
    prompt_hash = hex_digest(template_text, length=16)
    queries = load_queries(queries_path)
    synonyms = load_synonyms(synonyms_path)
    rng = random.Random(config.seed)
    jobs = []
    for qid, text in queries.items():
        term = find_term(text, synonyms)
        if term:
            jobs.append((qid, text, term, rng.choice(synonyms[term])))
    cache = _GenerationCache(Path(cache_path) if cache_path else Path(str(out_path) + ".cache.sqlite"))
    counts: Counter[str] = Counter(queries_without_term=len(queries) - len(jobs))

    def generate(job: tuple[str, str, str, str]) -> tuple[dict[str, Any] | None, list[str]]:
        _, query, term, synonym = job
        failures = []
        for attempt in range(config.max_attempts):
            key = hex_digest(json.dumps([client.config.id, prompt_hash, query, term, synonym, attempt], ensure_ascii=False))
            reply = cache.get(key)
            if reply is None:
                user = Template(template["user"]).substitute(query=query, term=term, synonym=synonym)
                reply = client.complete([{"role": "system", "content": template["system"]},
                                         {"role": "user", "content": user}])
                cache.put(key, reply)
            gen = _parse_object(reply)
            reason = check_generation(query, term, synonym, gen, config.length_tolerance)
            if reason is None:
                return gen, failures
            failures.append(reason)
        return None, failures

    rows: list[dict[str, Any]] = []
    examples = []
    with ThreadPoolExecutor(max_workers=config.concurrency) as pool:
        results = list(tqdm(pool.map(generate, jobs), total=len(jobs), desc="build-sts",
                            disable=not show_progress))
    for (_, query, term, synonym), (gen, failures) in zip(jobs, results):
        counts.update(failures)
        if gen is None:
            counts["queries_failed"] += 1
            continue
        counts["queries_ok"] += 1
        for kind in KINDS:
            rows.append({"sentence1": query, "sentence2": gen[kind], "score": config.scores[kind]})
        if len(examples) < 5:
            examples.append({"query": query, "term": term, "synonym": synonym, **{k: gen[k] for k in KINDS}})
    cache.close()
    if len(rows) < 2:
        raise CareError(f"build-sts produced {len(rows)} pairs; check the synonym dictionary covers the queries "
                        f"and the LLM replies (failures: {dict(counts)})")
    write_jsonl(out_path, rows)
    report = {"pairs": len(rows), **dict(counts), "usage": client.usage().as_dict(), "examples": examples,
              "config": asdict(config)}
    write_json(Path(str(out_path) + ".report.json"), report)
    return report
