"""``care bench service-load`` (care.bench.service_load): its light clients, its measurement end to end on a tiny index
against a running service, and the record's ratios and report."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from care.bench.service_load.client import OneClient, run_clients
from care.bench.service_load.config import ServiceLoadConfig
from care.bench.service_load.measure import server_timing_p50
from care.cli import app
from care.errors import CareError


@pytest.fixture(scope="module")
def tiny_index(tmp_path_factory):
    from care.index.build import BuildOptions, build
    from care.testing.tiny_model import make_tiny_care_model, write_corpus

    root = tmp_path_factory.mktemp("service-load")
    model = make_tiny_care_model(root / "tiny")
    output = root / "idx"
    build(BuildOptions(model=str(model), corpus=write_corpus(root / "corpus.jsonl"), output=output, batch_size=4,
                       chunk_size=4))
    return output


@pytest.fixture(scope="module")
def running(tiny_index):
    from care.serve.app import create_app
    from care.serve.engine import load_engine
    from care.serve.server import serve_in_thread

    with serve_in_thread(create_app(load_engine(tiny_index))) as url:
        yield url


def test_the_light_clients_read_the_services_answers(running):
    client = OneClient(running)
    status, body, timing = client.post("/search", b'{"query": "\\u5934\\u75db", "k": 2}')
    assert status == 200 and len(json.loads(body)["hits"]) == 2
    assert set(server_timing_p50([timing])) == {"app", "search"}
    assert client.post("/search", b'{"k": 2}')[0] == 422
    client.close()
    level = run_clients(running, [b'{"query": "\\u5934\\u75db", "k": 1}', b'{"k": 1}'], clients=3, seconds=0.5)
    assert level.clients == 3 and level.requests > 0 and set(level.status) == {"200", "422"}
    assert level.dropped == 0 and level.p50_ms <= level.p99_ms


def test_server_timing_p50_takes_each_metrics_median():
    headers = ["search;dur=2, app;dur=3", "search;dur=4, app;dur=5", "search;dur=3, app;dur=4.5", ""]
    assert server_timing_p50(headers) == {"search": 3.0, "app": 4.5}
    assert server_timing_p50([]) == {}


def test_the_command_measures_a_running_service_against_the_bare_loop(tiny_index, running, tmp_path):
    queries = tmp_path / "queries.jsonl"
    queries.write_text("".join(json.dumps({"_id": f"q{i}", "text": t}) + "\n"
                               for i, t in enumerate(["头痛怎么办", "高血压吃什么药", "反酸烧心"])), encoding="utf-8")
    results = tmp_path / "results"
    args = ["bench", "service-load", "--index", str(tiny_index), "--queries", str(queries), "--url", running,
            "--clients", "1", "--clients", "2", "--seconds", "0.5", "--ceiling-seconds", "0.2", "--min-calls", "10",
            "--max-calls", "20", "--verify", "off", "--results", str(results), "--name", "tiny", "--allow-dirty",
            "--work", str(tmp_path / "work")]
    done = CliRunner().invoke(app, args)
    assert done.exit_code == 0, done.output
    record = json.loads((results / "service_load" / "tiny.json").read_text(encoding="utf-8"))
    extra, one = record["extra"], record["latencies"]["one_client"]
    assert extra["of_variant"] == "running" and set(extra["variants"]) == {"running"}
    assert extra["app_over_bare"] == one["variants"]["running"]["app_over_bare"] > 0  # the service's own view
    assert extra["served_over_bare"] == pytest.approx(one["variants"]["running"]["http_p50_ms"] / one["bare_p50_ms"],
                                                      rel=1e-3)
    curve = record["latencies"]["curves"]["running"]
    assert [row["clients"] for row in curve] == [1, 2] and all(set(row["status"]) == {"200"} for row in curve)
    ceiling = record["latencies"]["bare_ceiling"]
    assert extra["throughput_of_ceiling"] == pytest.approx(curve[-1]["qps"] / ceiling["ceiling_qps"], rel=1e-3)
    assert set(ceiling["batches"]) == {"1", "8", "32"}
    assert extra["served_over_bare_back_to_back"] == pytest.approx(curve[0]["p50_ms"] / ceiling["batches"]["1"]["batch_p50_ms"],
                                                                   rel=1e-3)
    report = (results / "service_load" / "tiny.md").read_text(encoding="utf-8")
    assert "served / bare" in report and "target ≤ 1.25" in report and "back to back" in report


def test_back_to_back_is_the_one_client_level_over_the_bare_batch_of_one_and_absent_without_either():
    from care.bench.service_load.report import back_to_back

    latencies = {"curves": {"lean": [{"clients": 1, "p50_ms": 1.3}, {"clients": 8, "p50_ms": 5.0}]},
                 "bare_ceiling": {"batches": {"1": {"batch_p50_ms": 1.0}, "8": {"batch_p50_ms": 4.0}}}}
    assert back_to_back(latencies, "lean") == 1.3
    assert back_to_back({**latencies, "curves": {"lean": [{"clients": 8, "p50_ms": 5.0}]}}, "lean") is None
    assert back_to_back({**latencies, "bare_ceiling": {"batches": {"8": {"batch_p50_ms": 4.0}}}}, "lean") is None


def test_the_settings_refuse_what_cannot_be_measured():
    with pytest.raises(CareError, match="unknown variant"):
        ServiceLoadConfig(index="idx", variants=("fast",))  # type: ignore[arg-type]
    with pytest.raises(CareError, match="seconds"):
        ServiceLoadConfig(index="idx", seconds=0)
    with pytest.raises(CareError, match="verify"):
        ServiceLoadConfig(index="idx", verify="sometimes")  # type: ignore[arg-type]
    config = ServiceLoadConfig(index="idx", variants=("lean", "h11"), clients=(1, 64))
    assert ServiceLoadConfig.from_dict(config.to_dict()) == config
    assert ServiceLoadConfig(index="idx", url="http://127.0.0.1:1").measured_variants == ("running",)


def test_a_servable_folder_over_a_vectors_file_serves_the_corpus_then_placeholders(tmp_path):
    import numpy as np

    from care.bench.service_load.index_folder import servable_index_folder
    from care.index.bundle import open_index_folder
    from care.index.config import IndexConfig
    from care.index.faiss_index import build_index
    from care.testing.tiny_model import SAMPLE_DOCS, write_corpus

    rng = np.random.default_rng(0)
    vectors = rng.standard_normal((200, 16)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    np.save(tmp_path / "vectors.npy", vectors)
    corpus = write_corpus(tmp_path / "corpus.jsonl")
    ivf = IndexConfig.from_dict({"type": "ivf", "nlist": 4, "nprobe": 1, "train_size": 200})
    prebuilt = build_index(ivf, 16)
    prebuilt.add(vectors)
    prebuilt.search(vectors[:1], 1)  # trains on what is buffered
    prebuilt.save(tmp_path / "prebuilt")
    folder = servable_index_folder(tmp_path / "vectors.npy", tmp_path / "served", corpus,
                                   IndexConfig.from_dict({**ivf.to_dict(), "nprobe": 4}), prebuilt=tmp_path / "prebuilt")
    bundle = open_index_folder(folder, verify="full")
    assert bundle.manifest.n_docs == 200 and bundle.index.config.nprobe == 4  # the search setting asked, not the build's
    scores, rows = bundle.index.search(vectors[[0, 150]], 1)
    assert rows[:, 0].tolist() == [0, 150]  # every list visited: exact
    docs = bundle.docstore.get([0, 150])
    assert docs[0].id == SAMPLE_DOCS[0]["id"] and docs[150].id == "synthetic-150"
    assert servable_index_folder(tmp_path / "vectors.npy", tmp_path / "served", corpus, ivf) == folder  # kept


def test_a_spawned_variant_is_care_serve_with_its_change_and_is_stopped(tiny_index, tmp_path):
    from care.bench.service_load.services import SpawnedService

    config = ServiceLoadConfig(index=str(tiny_index), variants=("h11",), verify="off")
    with SpawnedService(config, "h11", tmp_path) as service:
        status, body, _ = OneClient(service.url).post("/search", b'{"query": "\\u5934\\u75db", "k": 1}')
        assert status == 200 and json.loads(body)["k"] == 1
        assert service.cpu_seconds() > 0
    assert json.loads((tmp_path / "serve-h11.json").read_text(encoding="utf-8")) == {"http_parser": "h11"}
    assert service.process.poll() is not None  # stopped


def test_waiting_for_a_service_that_exits_names_it_and_its_exit_code():
    import subprocess
    import sys

    from care.bench.service_load.services import wait_healthy
    from care.errors import CareError

    process = subprocess.Popen([sys.executable, "-c", "raise SystemExit(3)"])
    process.wait()
    with pytest.raises(CareError, match=r"care serve \(test\): exited with 3"):
        wait_healthy(process, "http://127.0.0.1:9", 5.0, "care serve (test)")
