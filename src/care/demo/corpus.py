"""Doctor-style answer documents composed from each cell's fact sentences."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from care.demo.cells import Cell
from care.demo.config import DemoConfig
from care.demo.content.phrasing import CLOSINGS, GENERIC_OPENINGS
from care.demo.lexicon import SynonymLexicon
from care.errors import CareError

#: Draws allowed per document before giving up on finding a text not written yet.
MAX_DRAWS_PER_DOCUMENT = 50


@dataclass(frozen=True)
class DemoDocument:
    """A generated answer and the cell it was written for."""

    id: str
    text: str
    cell: Cell


def compose_answer(cell: Cell, rng: random.Random, lexicon: SynonymLexicon, config: DemoConfig) -> str:
    """One answer: an opening, 2-3 of the cell's facts in their written order, a closing.

    Dictionary terms (the condition's name included) are switched to random synonyms a doctor
    would write, so questions and answers often use different surface forms.
    """
    facts = cell.facts
    count = min(len(facts), rng.randint(config.facts_per_doc_min, config.facts_per_doc_max))
    chosen = sorted(rng.sample(range(len(facts)), count))
    if rng.random() < config.aspect_opening_prob:
        opening = rng.choice(cell.aspect.openings).format(c=cell.condition.name)
    else:
        opening = rng.choice(GENERIC_OPENINGS)
    body = "".join(facts[i] for i in chosen)
    closing = rng.choice(CLOSINGS).format(dept=cell.condition.department)
    return lexicon.vary(opening + body, rng, "document") + closing


def build_documents(
    cells: Sequence[Cell],
    rng: random.Random,
    lexicon: SynonymLexicon,
    config: DemoConfig,
    *,
    per_cell: tuple[int, int],
    id_prefix: str,
    exclude: frozenset[str] = frozenset(),
) -> list[DemoDocument]:
    """Write ``per_cell`` (min, max) distinct answers per cell, none equal to a text in ``exclude``.

    Returns the documents in a shuffled order with ids ``{id_prefix}0001``, ... in that order.
    Raises:
        CareError: the cell's facts cannot yield enough distinct texts.
    """
    seen = set(exclude)
    drafts: list[tuple[str, Cell]] = []
    for cell in cells:
        for _ in range(rng.randint(*per_cell)):
            for _draw in range(MAX_DRAWS_PER_DOCUMENT):
                text = compose_answer(cell, rng, lexicon, config)
                if text not in seen:
                    break
            else:
                raise CareError(f"{cell.key}: could not compose a new distinct answer; add facts or lower docs per cell")
            seen.add(text)
            drafts.append((text, cell))
    rng.shuffle(drafts)
    width = max(4, len(str(len(drafts))))
    return [DemoDocument(f"{id_prefix}{i:0{width}d}", text, cell) for i, (text, cell) in enumerate(drafts, start=1)]
