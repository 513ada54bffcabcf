"""The anonymiser's generated tables (``pii-table``, ``pii-taggers-table``) from ``bench_pii.py``'s record
``pii/pii.json``: the default tagger on the labelled set, on the three genre sets and on real dev-set answers,
then every lexical tagger."""

from __future__ import annotations

from pathlib import Path

from care.bench.record import BenchmarkRecord
from care.bench.reports.paths import RESULTS
from care.bench.reports.records import record
from care.bench.tables import markdown_table

#: The anonymiser's table (bench_pii.py): rows (label, key in the default tagger's pooled scores) in two column pairs;
#: ``kept:`` keys are keep categories, ``+`` joins two cells, bold keys carry a target.
PII_LEFT: tuple[tuple[str, str], ...] = (
    ("PHONE", "PHONE"), ("ID (any check digit, 6-8-4)", "ID"), ("BANK_CARD (any Luhn, groups)", "BANK_CARD"),
    ("MRN (病案号 住院号 门诊号 医保卡 …)", "MRN"), ("PASSPORT", "PASSPORT"), ("WECHAT", "WECHAT"), ("QQ", "QQ"),
    ("**kept: clinical values**", "kept:clinical"),
)
PII_RIGHT: tuple[tuple[str, str], ...] = (
    ("PLATE (`京A·12345`, new-energy)", "PLATE"), ("BIRTH_DATE (Chinese, ISO)", "BIRTH_DATE"), ("EMAIL", "EMAIL"),
    ("**structured, target ≥ 0.97**", "STRUCTURED"), ("NAME", "NAME"), ("ADDRESS (down to the room)", "ADDRESS"),
    ("**names + addresses, target ≥ 0.90**", "NAME_ADDRESS"),
    ("**kept: trap words; all, target ≥ 0.99**", "kept:trap+kept:ALL"),
)
PII_TARGET_KEYS = frozenset({"STRUCTURED", "NAME_ADDRESS", "kept:ALL"})


def _pii_share(pooled: dict, keys: str) -> str:
    """``0.999 (1,046)`` for each of ``keys`` (joined by ``+``); the share in bold where a target applies."""
    cells = []
    for key in keys.split("+"):
        group, _, name = key.rpartition(":")
        c = pooled["kept" if group == "kept" else "removed"][name]
        value = f"{c['hits'] / c['total']:.3f}" if c["total"] else "–"
        share = f"**{value}**" if key in PII_TARGET_KEYS else value
        cells.append(f"{share} ({c['total']:,})")
    return "; ".join(cells)


#: Names of the genre sets (care.curate.pii.eval_genres.GENRES) as the genre table shows them.
GENRE_LABELS = {"doctor_answer": "doctor answers", "encyclopedic": "encyclopedic articles, monographs",
                "clinical_note": "clinical notes"}


def _share(c: dict) -> str:
    return f"{c['hits'] / c['total']:.3f} ({c['total']:,})" if c["total"] else "–"


def pii_genres_table(rec: BenchmarkRecord) -> str:
    """Per genre set of the record (``scores[tagger]["genres"]``): identifiers removed, medical words kept and
    spurious removals per 1,000 texts with the protection and without it; empty when the record has none."""
    tagger = rec.config.get("reported_tagger", rec.config["winner"])
    genres = rec.scores[tagger].get("genres")
    if not genres:
        return ""
    target = rec.config["spurious_target_per_1000"]
    rows = []
    for genre, g in genres.items():
        spurious = f"{g['spurious_per_1000']:.1f}"
        rows.append([GENRE_LABELS.get(genre, genre), f"{g['texts']:,}", _share(g["removed"]["STRUCTURED"]),
                     _share(g["removed"]["NAME_ADDRESS"]), _share(g["kept"]["ALL"]),
                     f"**{spurious}**", f"{g['spurious_per_1000_without_protection']:.1f}"])
    return markdown_table([f"genre set (project-written), tagger {tagger}", "texts", "structured removed",
                           "names + addresses removed", "medical words kept",
                           f"spurious per 1,000 texts (target ≤ {target:g})", "without the protection"], rows)


def pii_table(results: Path = RESULTS) -> str:
    """The anonymiser's default tagger on the labelled set (both seeds pooled), then per genre set, then its
    spurious removals per 1,000 real dev-set answers with the clinical-term protection and without it."""
    rec = record("pii", "pii", results)
    tagger = rec.config.get("reported_tagger", rec.config["winner"])
    pooled = rec.scores[tagger]["pooled"]
    rows = [[left, _pii_share(pooled, lk), right, _pii_share(pooled, rk)] for (left, lk), (right, rk) in zip(PII_LEFT, PII_RIGHT)]
    table = markdown_table(["removed (every character)", "share", "removed (every character)", "share"], rows)
    genres = pii_genres_table(rec)
    table += "\n" + genres if genres else ""
    real = rec.scores[tagger].get("real")
    if real is None:
        return table + "\nReal answers: not measured (the dev set was absent when the benchmark ran).\n"
    rows = []
    for label, key in (("with the clinical-term protection (default)", "real"),
                       ("without it (`--no-clinical-terms`)", "real_without_protection")):
        r = rec.scores[tagger][key]
        spurious = f"{r['spurious_per_1000']:.1f}"
        rows.append([label, f"{r['removed_per_1000']:.1f}", f"**{spurious}**" if key == "real" else spurious,
                     str(r["unjudged"])])
    target = rec.config["spurious_target_per_1000"]
    return table + "\n" + markdown_table(
        [f"first {rec.config['real_texts']:,} dev-set answers, tagger {tagger}", "removed per 1,000",
         f"spurious per 1,000 (target ≤ {target:g})", "unjudged"], rows)


def pii_taggers_table(results: Path = RESULTS) -> str:
    """Each lexical tagger on the labelled set (pooled) and on the real answers: the default first, then by
    names + addresses removed."""
    rec = record("pii", "pii", results)
    reported = rec.config.get("reported_tagger", rec.config["winner"])
    rows = []
    for name in sorted(rec.scores, key=lambda n: (n != reported, -rec.scores[n]["pooled"]["removed"]["NAME_ADDRESS"]["share"])):
        s, lat = rec.scores[name], rec.latencies[name]
        p = s["pooled"]
        real = s.get("real")
        cells = [f"{p['removed'][k]['hits'] / p['removed'][k]['total']:.3f}" for k in ("NAME", "ADDRESS", "NAME_ADDRESS")]
        cells += [f"{p['kept'][k]['hits'] / p['kept'][k]['total']:.3f}" for k in ("trap", "ALL")]
        rows.append([f"**{name}** (default)" if name == reported else name, *cells, str(p["spurious"]),
                     f"{lat['eval_set']['texts_per_s']:.1f}", f"{lat['real']['texts_per_s']:.1f}" if real else None,
                     f"{real['removed_per_1000']:.1f}" if real else None,
                     f"{real['spurious_per_1000']:.1f} ({s['real_without_protection']['spurious_per_1000']:.1f})"
                     if real else None, f"{real['unjudged_per_1000']:.1f}" if real else None])
    rows += [[name, f"not run: {why}", *[None] * 11] for name, why in rec.config.get("skipped", {}).items()]
    return markdown_table(["tagger", "NAME", "ADDRESS", "names + addresses", "trap words kept", "all kept",
                           "spurious spans (set)", "texts/s (set)", "texts/s (real)", "removed per 1,000 real answers",
                           "spurious per 1,000 real answers (without protection)", "unjudged per 1,000 real answers"],
                          rows)
