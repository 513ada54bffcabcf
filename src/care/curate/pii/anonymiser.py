"""Remove personal information from Chinese medical text, replacing it by typed placeholders.

``Anonymiser(config).anonymise("患者张伟，电话13812345678")`` -> ``"患者[NAME]，电话[PHONE]"``.
:func:`anonymise_file` streams a JSONL file chunk by chunk, resumably, and returns a report of how
many items of each type were removed.

Recognisers: structured identifiers by shape and checksum (:mod:`~care.curate.pii.rules`) or after
a label (:mod:`~care.curate.pii.labels`), birth dates (:mod:`~care.curate.pii.birth_dates`), licence
plates (:mod:`~care.curate.pii.plates`); names (:mod:`~care.curate.pii.names`) and addresses
(:mod:`~care.curate.pii.address`) from a Chinese lexical tagger (:mod:`~care.curate.pii.lexical`,
LAC by default) plus context rules. A bare name candidate that is a clinical term, a medical word of
encyclopedic text (an eponym, a historic physician, a herb, a physiology term:
:mod:`~care.curate.pii.medical_terms`), cuts a word or holds a symptom character is dropped
(:mod:`~care.curate.pii.clinical`). Everything runs on :func:`~care.curate.pii.rules.normalise_width` of
the text (full-width digits and letters read as half-width).
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from tqdm import tqdm

from care.curate.checkpoint import StreamCheckpoint
from care.curate.pii.address import find_addresses
from care.curate.pii.birth_dates import find_birth_dates
from care.curate.pii.clinical import NameGuard, load_clinical_lexicon
from care.curate.pii.labels import find_labelled
from care.curate.pii.lexical import DEFAULT_TAGGER, TAGGERS, LexicalTagger, Token, load_tagger
from care.curate.pii.names import find_names
from care.curate.pii.plates import find_plates
from care.curate.pii.rules import (
    PII_TYPES,
    TYPE_PRIORITY,
    Span,
    find_bank_cards,
    find_emails,
    find_phones,
    find_resident_ids,
    find_urls,
    normalise_width,
)
from care.data.errors import DataFormatError
from care.data.io import iter_jsonl, write_json

logger = logging.getLogger(__name__)

DEFAULT_CHUNK_SIZE = 1000
DEFAULT_FIELDS: tuple[str, ...] = ("text", "title", "query", "pos", "neg", "positive", "negative")


@dataclass
class AnonymiserConfig:
    """Which types to remove and how.

    Attributes:
        types: PII types to detect (subset of :data:`~care.curate.pii.rules.PII_TYPES`).
        placeholder: format of the replacement; ``{type}`` is the type name (``[PHONE]``).
        old_ids: also remove 15-digit pre-1999 resident IDs (validated by birth date only).
        tagger: the lexical tagger that marks names and places (``lac``, ``jieba`` or ``thulac``,
            see :mod:`care.curate.pii.lexical`); ``lac`` measured best (``benchmarks/bench_pii.py``).
        clinical_terms: drop bare name candidates that are clinical terms, cut a word or hold a symptom
            character (:mod:`care.curate.pii.clinical`; needs the package PyCMeKG).
    """

    types: tuple[str, ...] = PII_TYPES
    placeholder: str = "[{type}]"
    old_ids: bool = True
    tagger: str = DEFAULT_TAGGER
    clinical_terms: bool = True

    def __post_init__(self) -> None:
        from care.errors import CareError

        self.types = tuple(self.types)
        unknown = set(self.types) - set(PII_TYPES)
        if unknown:
            raise CareError(f"unknown PII types {sorted(unknown)}; choose from {', '.join(PII_TYPES)}")
        if self.tagger not in TAGGERS:
            raise CareError(f"unknown lexical tagger {self.tagger!r}; choose from {', '.join(TAGGERS)}")


def resolve_overlaps(spans: Iterable[Span]) -> list[Span]:
    """Keep non-overlapping spans: higher-priority type first, then longer, then earlier."""
    rank = {t: i for i, t in enumerate(TYPE_PRIORITY)}
    chosen: list[Span] = []
    for span in sorted(set(spans), key=lambda s: (rank[s.type], -(s.end - s.start), s.start)):
        if all(span.end <= c.start or span.start >= c.end for c in chosen):
            chosen.append(span)
    return sorted(chosen)


#: Types found from the lexical tagger's tokens; the tagger runs only when one of them is asked for.
LEXICAL_TYPES = frozenset({"NAME", "ADDRESS"})


class Anonymiser:
    """Finds and replaces personal information; stateless and thread-safe."""

    def __init__(self, config: AnonymiserConfig | None = None, *, tagger: LexicalTagger | None = None) -> None:
        """``tagger`` overrides the one named by ``config.tagger`` (an already loaded or custom tagger)."""
        self.config = config or AnonymiserConfig()
        self._types = frozenset(self.config.types)
        self._tagger = tagger
        if self._tagger is None and self._types & LEXICAL_TYPES:
            self._tagger = load_tagger(self.config.tagger)
        self._guard: NameGuard | None = None
        if self.config.clinical_terms and "NAME" in self._types:
            self._guard = NameGuard(load_clinical_lexicon())
        self._rules: list[Callable[[str], list[Span]]] = [
            find_emails, find_urls, find_phones, find_bank_cards,
            lambda t: find_resident_ids(t, old_ids=self.config.old_ids),
            find_labelled, find_birth_dates, find_plates,
        ]

    def find(self, text: str) -> list[Span]:
        """All non-overlapping PII spans in ``text``, in order (``span.text`` is the original text)."""
        norm = normalise_width(text)
        spans: list[Span] = []
        for rule in self._rules:
            spans.extend(rule(norm))
        if self._tagger is not None:
            tokens: list[Token] = self._tagger.tag([norm])[0]
            if "NAME" in self._types:
                spans.extend(find_names(norm, tokens))
            if "ADDRESS" in self._types:
                spans.extend(find_addresses(norm, tokens))
        if self._guard is not None:
            spans, _ = self._guard.filter(norm, spans)
        chosen = resolve_overlaps(s for s in spans if s.type in self._types)
        return [Span(s.start, s.end, s.type, text[s.start:s.end]) for s in chosen]

    def anonymise(self, text: str) -> tuple[str, list[Span]]:
        """Return ``text`` with every span replaced by its placeholder, and the spans removed."""
        spans = self.find(text)
        if not spans:
            return text, spans
        out, pos = [], 0
        for span in spans:
            out.append(text[pos:span.start])
            out.append(self.config.placeholder.format(type=span.type))
            pos = span.end
        out.append(text[pos:])
        return "".join(out), spans


@dataclass
class AnonymiseReport:
    """What :func:`anonymise_file` removed."""

    rows: int = 0
    rows_changed: int = 0
    removed: dict[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _anonymise_row(anonymiser: Anonymiser, row: dict[str, Any], fields: tuple[str, ...], counts: Counter[str]) -> bool:
    changed = False
    for key in fields:
        value = row.get(key)
        if isinstance(value, str):
            new, spans = anonymiser.anonymise(value)
            row[key] = new
        elif isinstance(value, list) and all(isinstance(v, str) for v in value):
            new_list, spans = [], []
            for v in value:
                new_v, s = anonymiser.anonymise(v)
                new_list.append(new_v)
                spans.extend(s)
            row[key] = new_list
        else:
            continue
        for span in spans:
            counts[span.type] += 1
        changed |= bool(spans)
    return changed


def anonymise_file(
    input_path: str | Path,
    output_path: str | Path,
    *,
    fields: Iterable[str] = DEFAULT_FIELDS,
    config: AnonymiserConfig | None = None,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    report_path: str | Path | None = None,
    show_progress: bool = True,
) -> AnonymiseReport:
    """Anonymise the string (or list-of-string) ``fields`` of every row of a JSONL file.

    Streams ``input_path`` in chunks of ``chunk_size`` rows; other fields are copied unchanged.
    Resumes an interrupted run from ``<output>.progress.json``. Writes the report (counts by type)
    to ``report_path`` when given.
    """
    input_path = Path(input_path)
    fields = tuple(fields)
    anonymiser = Anonymiser(config)
    checkpoint = StreamCheckpoint(output_path, {
        "step": "anonymise", "input": str(input_path), "fields": list(fields), "config": asdict(anonymiser.config),
    }, inputs=[input_path])
    progress = checkpoint.resume()
    report = AnonymiseReport(**progress.state) if progress.state else AnonymiseReport()
    counts: Counter[str] = Counter(report.removed)
    chunk: list[dict[str, Any]] = []
    last_line = progress.lines_done
    any_field = False

    def flush() -> None:
        report.removed = dict(counts)
        checkpoint.append(chunk, lines_done=last_line, state=report.to_dict())
        chunk.clear()

    bar = tqdm(desc="anonymise", unit="row", disable=not show_progress, initial=report.rows)
    for line, row in iter_jsonl(input_path):
        if line <= progress.lines_done:
            continue
        changed = _anonymise_row(anonymiser, row, fields, counts)
        any_field |= any(k in row for k in fields)
        report.rows += 1
        report.rows_changed += int(changed)
        chunk.append(row)
        last_line = line
        bar.update(1)
        if len(chunk) >= chunk_size:
            flush()
    bar.close()
    if report.rows and not any_field and not progress.lines_done:
        raise DataFormatError(input_path, f"no row has any of the fields {list(fields)}",
                              hint="name the text fields with --field")
    flush()
    checkpoint.finish()
    if report_path is not None:
        write_json(report_path, report.to_dict())
    logger.info("anonymised %d rows (%d changed): %s", report.rows, report.rows_changed, report.removed)
    return report
