"""Patient-style questions for each cell, from aspect templates and condition surface forms."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from care.demo.cells import Cell
from care.demo.config import DemoConfig
from care.demo.content.phrasing import QUERY_PREFIXES
from care.demo.lexicon import SynonymLexicon
from care.errors import CareError

#: Draws allowed per question before giving up on finding a text not asked yet.
MAX_DRAWS_PER_QUESTION = 50


@dataclass(frozen=True)
class DemoQuery:
    """A generated question and the cell it asks about."""

    id: str
    text: str
    cell: Cell


def compose_question(cell: Cell, template: str, rng: random.Random, lexicon: SynonymLexicon, config: DemoConfig) -> str:
    """Fill ``template`` with a surface form patients use for the condition; maybe add a polite prefix."""
    form = rng.choice(lexicon.surface_forms(cell.condition.name, "query"))
    text = template.format(c=form)
    if rng.random() < config.query_prefix_prob:
        text = rng.choice(QUERY_PREFIXES) + text
    return text


def build_questions(
    cells: Sequence[Cell],
    rng: random.Random,
    lexicon: SynonymLexicon,
    config: DemoConfig,
    *,
    split: str,
    per_cell: int,
    id_prefix: str,
    exclude: frozenset[str] = frozenset(),
) -> list[DemoQuery]:
    """``per_cell`` questions per cell from distinct templates of ``split`` (``bench`` or ``train``).

    Benchmark questions come only from ``Aspect.bench_templates`` and training questions only
    from ``Aspect.train_templates``; texts in ``exclude`` are never produced.
    Raises:
        CareError: ``per_cell`` exceeds the templates available, or no new text can be drawn.
    """
    seen = set(exclude)
    out: list[DemoQuery] = []
    width = max(4, len(str(len(cells) * per_cell)))
    for cell in cells:
        templates = cell.aspect.bench_templates if split == "bench" else cell.aspect.train_templates
        if per_cell > len(templates):
            raise CareError(f"aspect {cell.aspect.key}: {per_cell} {split} questions per cell but only {len(templates)} templates")
        for template in rng.sample(templates, per_cell):
            for _draw in range(MAX_DRAWS_PER_QUESTION):
                text = compose_question(cell, template, rng, lexicon, config)
                if text not in seen:
                    break
            else:
                raise CareError(f"{cell.key}: could not draw a new question from template {template!r}")
            seen.add(text)
            out.append(DemoQuery(f"{id_prefix}{len(out) + 1:0{width}d}", text, cell))
    return out
