"""Training rows in the FlagEmbedding / CARE format and unlabelled questions for curation demos.

Training questions come only from the aspects' training templates and training answers are
written separately from the benchmark corpus, so no benchmark question or document appears in
the training file. Negatives are always graded 0 for the question's cell (never a grade 1 or 2
document), drawn from documents that share the condition or the aspect (hard negatives).
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from care.demo.cells import GRADE_NONE, Cell, RelevanceScheme
from care.demo.config import DemoConfig
from care.demo.content.phrasing import (
    PHONE_PREFIXES,
    QUERY_PREFIXES,
    RAW_CONTEXTS,
    RAW_PII_NAMES,
    RAW_PII_TEMPLATES,
)
from care.demo.corpus import DemoDocument
from care.demo.lexicon import SynonymLexicon
from care.demo.questions import DemoQuery
from care.errors import CareError

#: Ages drawn for the context sentence of raw questions.
RAW_AGE_RANGE = (25, 80)
#: Digits after the three-digit prefix of a synthetic mobile number.
PHONE_SUFFIX_DIGITS = 8


@dataclass(frozen=True)
class TrainExample:
    """One training row with the cells of its documents (for checks; the file holds the texts)."""

    query: DemoQuery
    pos: tuple[DemoDocument, ...]
    neg: tuple[DemoDocument, ...]

    def to_json(self) -> dict[str, object]:
        return {"query": self.query.text, "pos": [d.text for d in self.pos], "neg": [d.text for d in self.neg]}


def compose_train_examples(
    queries: Sequence[DemoQuery],
    documents: Sequence[DemoDocument],
    scheme: RelevanceScheme,
    rng: random.Random,
    config: DemoConfig,
) -> list[TrainExample]:
    """One row per training question: every training answer of its cell as ``pos``, ``train_negatives`` hard negatives."""
    by_cell: dict[str, list[DemoDocument]] = defaultdict(list)
    for doc in documents:
        by_cell[doc.cell.key].append(doc)
    rows = []
    for query in queries:
        positives = by_cell.get(query.cell.key)
        if not positives:
            raise CareError(f"{query.cell.key}: no training answer to use as positive")
        hard = [
            d for d in documents
            if scheme.grade(query.cell, d.cell) == GRADE_NONE
            and (d.cell.condition.key == query.cell.condition.key or d.cell.aspect.key == query.cell.aspect.key)
        ]
        if len(hard) < config.train_negatives:
            raise CareError(f"{query.cell.key}: only {len(hard)} hard negatives, {config.train_negatives} needed")
        rows.append(TrainExample(query, tuple(positives), tuple(rng.sample(hard, config.train_negatives))))
    return rows


def _synthetic_phone(rng: random.Random) -> str:
    return rng.choice(PHONE_PREFIXES) + "".join(str(rng.randrange(10)) for _ in range(PHONE_SUFFIX_DIGITS))


def build_raw_queries(
    cells: Sequence[Cell],
    rng: random.Random,
    lexicon: SynonymLexicon,
    config: DemoConfig,
    *,
    exclude: frozenset[str],
) -> list[dict[str, str]]:
    """Unlabelled patient questions (``{"id", "text"}``) for curation demos.

    Built from training templates, some with an age context and some with synthetic personal
    details (a generic name and a random mobile number) for the anonymisation step; the same
    template recurs with different wording around it, so near-duplicates exist for the
    diversity filter. Texts in ``exclude`` (benchmark questions) are never produced.
    """
    rows: list[dict[str, str]] = []
    seen = set(exclude)
    for cell in cells:
        for template in rng.sample(cell.aspect.train_templates, config.raw_queries_per_cell):
            question = template.format(c=rng.choice(lexicon.surface_forms(cell.condition.name, "query")))
            parts = []
            if rng.random() < config.raw_pii_prob:
                parts.append(rng.choice(RAW_PII_TEMPLATES).format(name=rng.choice(RAW_PII_NAMES), phone=_synthetic_phone(rng)))
            if rng.random() < config.query_prefix_prob:
                parts.append(rng.choice(QUERY_PREFIXES))
            if rng.random() < config.raw_context_prob:
                parts.append(rng.choice(RAW_CONTEXTS).format(age=rng.randint(*RAW_AGE_RANGE)))
            text = "".join(parts) + question
            if text in seen:
                continue
            seen.add(text)
            rows.append({"id": f"raw{len(rows) + 1:04d}", "text": text})
    return rows
