"""``pii.md``: the anonymiser's report of :mod:`care.curate.pii.tagger_bench`'s results (``benchmarks/bench_pii.py``).

:func:`markdown` writes the reported tagger's removed and kept shares per type (pooled and per seed, with the
targets), the lexical taggers' table (ranked by :data:`~care.curate.pii.tagger_bench.RANKING`), the real-text
removals, the genre table (:func:`genre_markdown`) and the first leaks and lost keeps.
"""

from __future__ import annotations

from care.curate.pii.eval_set import generate_eval_set
from care.curate.pii.removals import SPURIOUS_TARGET_PER_1000
from care.curate.pii.rules import PII_TYPES
from care.curate.pii.scoring import TARGETS, Count
from care.curate.pii.tagger_bench import RANKING


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
