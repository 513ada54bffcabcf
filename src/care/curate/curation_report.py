"""``curate/full.md`` (``quick.md``): :mod:`care.curate.curation_bench`'s results as Markdown."""

from __future__ import annotations

import json

from care.curate.curation_bench import CONCURRENCY, SERVER_DELAY_S


def markdown(res: dict) -> str:
    """The anonymiser's table, diversify's runs and the judge overhead of one run's results ``res``."""
    a = res["anonymise"]
    lines = ["# Curation pipeline benchmark", "",
             f"Machine: {res['machine']}. Produced by `python -m benchmarks.bench_curate`.", "",
             f"## Anonymiser on the synthetic labelled set ({a['labelled_set']['texts']} texts)", "",
             "| type | gold | predicted | recall | precision | exact boundaries | removed (every character) |",
             "|---|---|---|---|---|---|---|"]
    scores = a["labelled_set"]["scores"]
    for name, gold in scores["removed"].items():
        pred = scores["predicted"].get(name, {"total": 0, "share": 1.0})
        recall = gold["typed"] / gold["total"] if gold["total"] else 1.0
        lines.append(f"| {name} | {gold['total']} | {pred['total']} | {recall:.4f} | {pred['share']:.4f} | {gold['exact']} "
                     f"| {gold['share']:.4f} |")
    lines.append(f"| kept (look-alike sentences) | {scores['kept']['ALL']['total']} | | | | | kept {scores['kept']['ALL']['share']:.4f} |")
    t = a["throughput"]
    lines += ["", f"Throughput on {t['texts']} real texts ({t['corpus']}): **{t['texts_per_s']:.0f} texts/s** "
              f"({t['chars_per_s']:.0f} chars/s). Spans removed per 1,000 real texts (mostly false positives: "
              f"the dev answers hold almost no personal data): {json.dumps(a['real_corpus_detections_per_1000'])}.", "",
              "## Diversify", "", "| run | encoder | texts | threshold | texts/s | kept ratio |", "|---|---|---|---|---|---|"]
    for name, d in res["diversify"].items():
        lines.append(f"| {name} | {d['encoder']} | {d['texts']} | {d['threshold']} | {d['texts_per_s']:.1f} | {d['kept_ratio']:.3f} |")
    quant = res["diversify"]["e5_query"].get("nearest_neighbour_similarity_quantiles")
    if quant:
        lines += ["", "The first quarter of each run seeds the index unfiltered. Nearest-neighbour cosine similarity among "
                  f"the e5 query sample (quantiles): {json.dumps({k: round(v, 3) for k, v in quant.items()})} — "
                  "the paper's thresholds were set for its own encoder; calibrate t for yours."]
    lines += ["", f"## Judge pipeline overhead ({CONCURRENCY} concurrent requests, server sleeps {SERVER_DELAY_S * 1000:.0f} ms per request)", "",
              "| passages per call | pairs | calls | wall s | server-only s | overhead ms/pair | overhead ms/call | fully cached rerun s |",
              "|---|---|---|---|---|---|---|---|"]
    for name, j in res["judge_overhead"].items():
        lines.append(f"| {name.rsplit('_', 1)[1]} | {j['pairs']} | {j['calls']} | {j['wall_s']:.2f} | {j['server_only_s']:.2f} | "
                     f"{j['overhead_ms_per_pair']:.2f} | {j['overhead_ms_per_call']:.2f} | {j['cached_rerun_s']:.3f} |")
    return "\n".join(lines) + "\n"
