"""The million-vector search benchmark's logic (care.bench.search_1m) at a small size: synthetic vectors around real
ones, exact truth, a build record, a timed sweep with recall, and the record naming the best setting."""

from __future__ import annotations

import json

import numpy as np

from care.bench.search_1m.data import build_data
from care.bench.search_1m.indexes import build_one, ground_truth, search_one
from care.bench.search_1m.report import write_report


def _real(n_docs: int = 60, n_queries: int = 12, dim: int = 16) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    centre = rng.standard_normal(dim)
    docs = centre + rng.standard_normal((n_docs, dim))
    queries = docs[:n_queries] + 0.1 * rng.standard_normal((n_queries, dim))
    unit = lambda x: (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)  # noqa: E731
    return unit(docs), unit(queries)


def test_a_small_set_is_built_searched_and_recorded(tmp_path):
    folder = build_data(tmp_path, 16, 3000, _real)
    vectors, queries = np.load(folder / "vectors.npy"), np.load(folder / "queries.npy")
    assert vectors.shape == (3000, 16) and queries.shape == (12, 16)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-4)
    info = json.loads((folder / "data.json").read_text(encoding="utf-8"))
    assert info["real_rows"] == 60 and info["n"] == 3000
    assert build_data(tmp_path, 16, 3000, lambda: (_ for _ in ()).throw(AssertionError("rebuilt"))) == folder  # cached
    truth = ground_truth(folder)
    exact = np.argsort(-(queries @ vectors.T), axis=1)[:, :10]
    assert (np.sort(truth, axis=1) == np.sort(exact, axis=1)).all()
    spec = {"config": {"type": "flat"}, "sweep": [{}]}
    build = build_one(folder, "flat", spec, 60.0, 1)
    assert build["config"]["type"] == "flat" and (folder / "flat" / "build.json").is_file()
    rows = search_one(folder, "flat", spec, truth)
    assert rows[0]["recall@10"] == 1.0 and rows[0]["index"] == "flat"
    path = write_report(folder, 16, {"flat": build}, rows, build_threads=1, hnsw_budget_min=1.0, indexes="flat",
                        results=tmp_path / "results")
    record = json.loads(path.read_text(encoding="utf-8"))
    assert record["extra"]["best_meeting_targets"]["index"] == "flat"
    assert "Best setting meeting both targets: flat" in path.with_suffix(".md").read_text(encoding="utf-8")
