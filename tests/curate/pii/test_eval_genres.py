"""The genre sets: exact gold spans, the same texts for the same seed, and the anonymiser's scores on
a sample of each genre (no spurious removal, every medical word kept, names and addresses found)."""

from __future__ import annotations

import pytest

from care.curate.pii.anonymiser import Anonymiser
from care.curate.pii.eval_genres import BODIES, GENRES, PII_SHARE, generate_genre_set
from care.curate.pii.eval_line import KEEP_TRAP
from care.curate.pii.scoring import TARGETS, score_eval_set
from care.errors import CareError

#: Texts per genre for the scored sample (a few seconds with LAC).
SAMPLE = 40


@pytest.mark.parametrize("genre", GENRES)
def test_spans_are_exact_and_the_set_is_reproducible(genre):
    lines = generate_genre_set(genre, 200, seed=3)
    assert lines == generate_genre_set(genre, 200, seed=3) != generate_genre_set(genre, 200, seed=4)
    for line in lines:
        assert line.keep and all(k.type == KEEP_TRAP for k in line.keep)
        for span in (*line.pii, *line.keep):
            assert line.text[span.start:span.end] == span.text and span.text
        assert "<" not in line.text and ">" not in line.text  # every keep marker was read
    with_pii = sum(bool(line.pii) for line in lines) / len(lines)
    assert abs(with_pii - PII_SHARE) < 0.15


def test_genres_differ_and_unknown_genres_are_refused():
    assert len({BODIES[g] for g in GENRES}) == len(GENRES)
    with pytest.raises(CareError, match="unknown genre 'forum'"):
        generate_genre_set("forum", 3)


@pytest.fixture(scope="module")
def anonymiser() -> Anonymiser:
    return Anonymiser()


@pytest.mark.parametrize("genre", GENRES)
def test_the_anonymiser_keeps_medicine_whole_in_every_genre(anonymiser, genre):
    lines = generate_genre_set(genre, SAMPLE)
    scores = score_eval_set(lines, [anonymiser.find(line.text) for line in lines])
    assert scores.spurious == 0, scores.lost
    assert scores.kept["ALL"].share == 1.0
    assert scores.removed["NAME_ADDRESS"].share >= TARGETS["NAME_ADDRESS"]
    assert scores.removed["STRUCTURED"].share >= TARGETS["STRUCTURED"]
