"""The anonymiser's genre table from a hand-made record: one row per genre, the spurious figure in bold,
nothing when the record has no genre sets."""

from __future__ import annotations

from care.bench.record import BenchmarkRecord
from care.bench.reports.pii import pii_genres_table


def _count(hits: int, total: int) -> dict:
    return {"hits": hits, "total": total, "share": hits / total}


def _genre(spurious: float, without: float) -> dict:
    return {"removed": {"STRUCTURED": _count(97, 97), "NAME_ADDRESS": _count(124, 126)},
            "kept": {"ALL": _count(1422, 1422)}, "texts": 1000, "spurious_per_1000": spurious, "spurious_per_1000_without_protection": without}


def test_genre_table_by_hand():
    config = {"reported_tagger": "lac", "winner": "thulac", "spurious_target_per_1000": 1.0}
    genres = {"doctor_answer": _genre(0.0, 3.0), "encyclopedic": _genre(1.0, 21.0)}
    rec = BenchmarkRecord("pii", "pii", config=config, seeds=[17], scores={"lac": {"genres": genres}})
    table = pii_genres_table(rec)
    assert "spurious per 1,000 texts (target ≤ 1)" in table
    assert "| doctor answers | 1,000 | 1.000 (97) | 0.984 (126) | 1.000 (1,422) | **0.0** | 3.0 |" in table
    assert "| encyclopedic articles, monographs | 1,000 |" in table and "| **1.0** | 21.0 |" in table
    assert pii_genres_table(BenchmarkRecord("pii", "pii", config=config, seeds=[17], scores={"lac": {}})) == ""
