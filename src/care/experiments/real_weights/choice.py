"""The CARE rows' settings in the real-weights runs: the recipe as shipped, given (``--care-settings``), or the
variant with the best validation nDCG@10 (``--care-from-validation``), kept in the selection protocol.

:func:`chosen_variant` reads the ``validation_seed<K>`` records (the variants of ``--validation`` runs) and picks
the best mean (:func:`care.train.recipes.sweep.pick_best`); :func:`variant_selection` is that choice as the record's
:class:`~care.bench.selection.Selection`; :func:`care_variant` applies the command line's rule (one way of choosing).
"""

from __future__ import annotations

import argparse
import logging
import statistics
from dataclasses import replace
from pathlib import Path

from care.bench.record import BenchmarkRecord, read_records
from care.bench.selection import VALIDATION, Selection
from care.experiments.real_weights import EXPERIMENT
from care.train.recipes.sweep import pick_best
from care.train.recipes.variants import Variant, parse_items

logger = logging.getLogger("bench_real_weights")

#: The CARE row's label; a variant's row is ``CARE [NAME]``.
CARE_ROW = "CARE"
#: What the validation records are named (``validation_seed<K>``).
VALIDATION_RECORDS = "validation_seed"


def _is_care_row(label: str) -> bool:
    return label == CARE_ROW or (label.startswith(f"{CARE_ROW} [") and label.endswith("]"))


def _validation_records(out: Path) -> dict[str, BenchmarkRecord]:
    return {key: r for key, r in read_records(out, EXPERIMENT).items() if key.startswith(VALIDATION_RECORDS)}


def _variant_means(records: list[BenchmarkRecord]) -> dict[str, float]:
    """Every CARE variant's mean validation nDCG@10 over ``records``."""
    return {label: statistics.mean(r.scores[label]["ndcg_at_10"] for r in records) for label in records[0].scores
            if _is_care_row(label)}


def chosen_variant(out: Path) -> Variant:
    """The CARE variant with the best validation nDCG@10 (mean over the validation records' seeds under ``out``);
    the variant without items is the recipe as shipped.

    Raises:
        SystemExit: no validation records (run with ``--validation`` first).
    """
    records = list(_validation_records(out).values())
    if not records:
        raise SystemExit(f"--care-from-validation: no validation records under {out / EXPERIMENT}; "
                         "run with --validation first")
    means = _variant_means(records)
    best = pick_best(means)
    logger.info("validation nDCG@10 of the CARE variants: %s -> %s", {k: round(v, 4) for k, v in means.items()}, best)
    name = best[len(f"{CARE_ROW} ["):-1]
    return Variant("") if best == CARE_ROW else parse_items(name, records[0].config["variants"][name])


def variant_selection(out: Path, variant: Variant) -> Selection:
    """``--care-from-validation``'s choice in the selection protocol: every CARE variant's mean validation nDCG@10
    over the validation records (:func:`chosen_variant`), the one chosen."""
    records = _validation_records(out)
    means = {label: round(value, 4) for label, value in _variant_means(list(records.values())).items()}
    chosen = f"{CARE_ROW} [{variant.name}]" if variant.name else CARE_ROW
    return Selection("CARE variant (--care-from-validation)", VALIDATION, chosen, means, metric="ndcg_at_10",
                     record=", ".join(f"{EXPERIMENT}/{key}" for key in records), rows=[CARE_ROW])


def care_variant(args: argparse.Namespace, parser: argparse.ArgumentParser) -> Variant:
    """The CARE rows' settings: chosen on validation, given by --care-settings (named ''), or the preset's; both
    ways at once stop the parser with an error."""
    if args.care_from_validation and args.care_settings is not None:
        parser.error("--care-from-validation and --care-settings both choose the CARE rows' settings: give one")
    if args.care_from_validation:
        return chosen_variant(args.out)
    return replace(args.care_settings, name="") if args.care_settings else Variant("")
