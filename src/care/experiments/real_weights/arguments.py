"""``python -m benchmarks.bench_real_weights``' command line: every flag of the real-weights runs and its summary.

:func:`build_parser` is the parser (the driver adds ``--allow-dirty``); ``--variant`` and ``--care-settings`` are read
in ``care train sweep``'s variant grammar (:func:`care.train.recipes.variants.parse_variant`) and ``--tag`` checked
(:func:`~care.experiments.real_weights.seed_rows.check_tag`) while the arguments are parsed, before any training.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from care.bench.locations import RESULTS, RUNS
from care.experiments.real_weights.seed_rows import SKIPPABLE_ROWS, check_tag
from care.experiments.real_weights.towers import DEMO_RETRIEVAL, QUERY_LAYERS
from care.train.recipes.variants import Variant, parse_variant

#: Default seeds and latency depths.
SEEDS, LATENCY_LAYERS = [0, 1, 2], [6, 4, 3]


def variant_argument(text: str) -> Variant:
    """A ``NAME=ITEM;ITEM`` argument read as a recipe variant; a bad item stops the parser, naming it."""
    from care.config import ConfigError

    try:
        return parse_variant(text)
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def soup_argument(text: str) -> tuple[str, list[str]]:
    """``NAME=ROW,ROW,...`` -> ``(NAME, [ROW, ...])``; without ``=`` the parser stops, naming the form."""
    name, sign, rows = text.partition("=")
    if not sign:
        raise argparse.ArgumentTypeError(f"{text!r}: expected NAME=ROW,ROW,... (e.g. ab=a,b; CARE names the CARE row)")
    return name, [x for x in rows.split(",") if x]


def build_parser(description: str = "CARE with real weights on the dev set") -> argparse.ArgumentParser:
    """The real-weights runs' parser (without ``--allow-dirty``, which the driver adds)."""
    parser = argparse.ArgumentParser(description=description)
    add = parser.add_argument
    add("--data", type=Path, default=None, help="the dev set folder (default: $CARE_DEV_SET)")
    add("--e5", type=Path, default=RUNS / "e5" / "L12", help="exported multilingual-e5-small (written when missing)")
    add("--work", type=Path, default=RUNS / "real_weights")
    add("--out", type=Path, default=RESULTS, help="results root (records go to <out>/real_weights/)")
    add("--seeds", type=int, nargs="+", default=SEEDS)
    add("--layers", type=int, default=QUERY_LAYERS, help="query tower: e5 cut to this many strided layers")
    add("--validation", action="store_true", help="train without 10%% of the answer groups, score those")
    add("--variant", action="append", default=[], type=variant_argument, metavar="NAME=ITEM;ITEM;...",
        help="an extra CARE row in care train sweep's variant grammar, e.g. mined=stage2:mine=7")
    add("--soup", action="append", default=[], metavar="NAME=ROW,ROW,...", type=soup_argument,
        help="also score the uniform weight average of these --variant rows' CARE models (CARE names the CARE row)")
    add("--symmetric-variant", nargs="*", default=[], metavar="NAME",
        help="also give symmetric large these --variant's Stage II (both towers start from it)")
    add("--care-from-validation", action="store_true", help="the CARE rows: the best variant of --validation's records")
    add("--care-settings", default=None, metavar="ITEM;ITEM;...", type=lambda s: variant_argument("care=" + s),
        help="the CARE rows' own settings in the variant grammar, e.g. 'stage2:mine=0'")
    add("--extra-layers", type=int, nargs="*", default=[], help="also train CARE with query towers of these depths")
    add("--ffn-width", type=int, default=None, help="narrow the query tower's feed-forward blocks to this many neurons "
                                                    "(ranked on the training queries; care model prune --ffn-width)")
    add("--latency-ffn", type=int, nargs="*", default=[], help="with --latency: also time each latency depth narrowed "
                                                               "to these feed-forward widths")
    add("--diagnose", action="store_true", help="instead: the query-side fine-tune against frozen e5 (diagnosis)")
    add("--travel", type=Path, nargs="*", default=[DEMO_RETRIEVAL],
        help="task folders every row is also scored on zero-shot (default: the embedded demo benchmark)")
    add("--max-length", type=int, default=None, help="token budget of both towers and the peer in training")
    add("--dense-miner", action="store_true", help="Stage I negatives by e5 instead of BM25 (no jieba)")
    add("--max-train", type=int, default=None, help="train on the first N training rows only (give it its own --work)")
    add("--no-student", action="store_true", help="skip the student against frozen e5 documents")
    add("--skip-rows", nargs="*", default=[], choices=sorted(SKIPPABLE_ROWS), help="record the seed without these rows")
    add("--no-int8", action="store_true", help="skip the ONNX int8 quality rows")
    add("--summarise", action="store_true", help="train nothing: aggregate the seeds' records")
    add("--latency", action="store_true", help="with --summarise: measure query latency here")
    add("--latency-layers", type=int, nargs="+", default=LATENCY_LAYERS)
    add("--latency-bm25", action="store_true", help="with --latency: also time BM25 searching the test split's corpus")
    add("--threads", type=int, default=None)
    add("--tag", default="", type=check_tag,
        help="name this run's records <split>_<tag>_seed<K> (and --summarise T's records); letters, digits, _ . -")
    return parser
