"""Hand-authored content of the embedded demo benchmark: conditions, aspects, synonyms, phrasing.

Everything here is plain general health information written for this project (no copied data).
"""

from __future__ import annotations

from care.demo.content import cardio, digestive, metabolic, neuro, renal, respiratory, rheum_blood
from care.demo.content.aspects import ASPECTS, RELATED_ASPECTS
from care.demo.content.schema import Aspect, Condition, SynonymGroup
from care.demo.content.synonyms import PROTECTED_PHRASES, SYNONYM_GROUPS

#: Every condition, in a fixed order (department by department).
CONDITIONS: tuple[Condition, ...] = (
    *cardio.CONDITIONS,
    *metabolic.CONDITIONS,
    *digestive.CONDITIONS,
    *respiratory.CONDITIONS,
    *neuro.CONDITIONS,
    *renal.CONDITIONS,
    *rheum_blood.CONDITIONS,
)

__all__ = [
    "ASPECTS",
    "CONDITIONS",
    "PROTECTED_PHRASES",
    "RELATED_ASPECTS",
    "SYNONYM_GROUPS",
    "Aspect",
    "Condition",
    "SynonymGroup",
]
