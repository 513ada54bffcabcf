"""Synonym STS pairs from the medical synonym dictionary, following the paper's recipe.

For a seed question that contains a dictionary term ``t``:

- positive: the same question with ``t`` swapped for a synonym (same meaning);
- hard negative: a synonym swap *and* a changed meaning (a different question about the synonym);
- easy negative: no swap, changed meaning (a different question about ``t`` itself).

Every generated sentence passes the paper's checks: the replacement term is present in it and
its length is within ``±sts_length_tolerance`` of the seed's.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Sequence
from dataclasses import dataclass

from care.demo.config import DemoConfig
from care.demo.content.phrasing import STS_TEMPLATES
from care.demo.content.schema import SynonymGroup
from care.errors import CareError

POSITIVE, HARD_NEGATIVE, EASY_NEGATIVE = "positive", "hard_negative", "easy_negative"


@dataclass(frozen=True)
class DemoSTSPair:
    """A scored pair with how it was made (kept in memory for tests; files hold the MTEB fields)."""

    sentence1: str
    sentence2: str
    score: float
    kind: str
    term: str
    replacement: str


def passes_checks(seed: str, generated: str, replacement: str, tolerance: float) -> bool:
    """The paper's filters: ``replacement`` occurs in ``generated``; lengths differ by at most ``tolerance``."""
    return replacement in generated and abs(len(generated) - len(seed)) <= tolerance * len(seed)


def _pairs_for_seed(
    group: SynonymGroup, term: str, template: str, rng: random.Random, config: DemoConfig
) -> list[DemoSTSPair] | None:
    """The three pairs for one seed, or ``None`` when some kind cannot pass the checks."""
    templates = STS_TEMPLATES[group.category]
    tol = config.sts_length_tolerance
    seed = template.format(t=term)
    synonyms = [t for t in group.terms if t != term]
    others = [t for t in templates if t != template]

    rng.shuffle(synonyms)
    positive = next(((s, template.format(t=s)) for s in synonyms if passes_checks(seed, template.format(t=s), s, tol)), None)
    swaps = list(itertools.product(others, synonyms))
    rng.shuffle(swaps)
    hard = next(((s, t.format(t=s)) for t, s in swaps if passes_checks(seed, t.format(t=s), s, tol)), None)
    easy_templates = list(others)
    rng.shuffle(easy_templates)
    easy = next((t.format(t=term) for t in easy_templates if passes_checks(seed, t.format(t=term), term, tol)), None)
    if positive is None or hard is None or easy is None:
        return None
    return [
        DemoSTSPair(seed, positive[1], config.sts_positive_score, POSITIVE, term, positive[0]),
        DemoSTSPair(seed, hard[1], config.sts_hard_negative_score, HARD_NEGATIVE, term, hard[0]),
        DemoSTSPair(seed, easy, config.sts_easy_negative_score, EASY_NEGATIVE, term, term),
    ]


def compose_sts_pairs(groups: Sequence[SynonymGroup], rng: random.Random, config: DemoConfig) -> list[DemoSTSPair]:
    """Up to ``config.sts_seeds_per_group`` seeds per group, three pairs each.

    A group whose terms differ too much in length for every template (e.g. 冠心病 /
    冠状动脉粥样硬化性心脏病) yields no seed, as the paper's length filter would drop it.
    Raises:
        CareError: a group's category has no STS templates.
    """
    pairs: list[DemoSTSPair] = []
    for group in groups:
        if group.category not in STS_TEMPLATES:
            raise CareError(f"synonym group {group.terms}: no STS templates for category {group.category!r}")
        candidates = list(itertools.product(group.terms, STS_TEMPLATES[group.category]))
        rng.shuffle(candidates)
        made = 0
        for term, template in candidates:
            if made == config.sts_seeds_per_group:
                break
            seed_pairs = _pairs_for_seed(group, term, template, rng, config)
            if seed_pairs is not None:
                pairs.extend(seed_pairs)
                made += 1
    return pairs
