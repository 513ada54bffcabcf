"""Every command that takes a corpus, on one folder exactly as BEIR publishes it (``_id``, title + text, a
title-only document, a ``metadata`` field, ``qrels/test.tsv`` and no ``qrels.tsv``), and training files
whose positive is one string (``"pos": "..."`` / ``"positive": "..."``).

Every command reads these through :mod:`care.data` (one reader per format), so each must accept them and
see a document as ``title text`` (the title alone for a title-only document)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from care.cli import app
from care.data.retrieval import load_corpus

from ..beir_folder import DOCS, QUERIES, TEST_QUERIES, TITLE_ONLY, full_text, metadata, write_beir_folder

runner = CliRunner()


def _ok(args: list[str]):
    result = runner.invoke(app, args)
    assert result.exit_code == 0, f"{args[:2]}: {result.output}\n{result.exception!r}"
    return result


def _rows(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


@pytest.fixture(scope="module")
def beir(tmp_path_factory):
    return write_beir_folder(tmp_path_factory.mktemp("beir"))


@pytest.fixture(scope="module")
def tiny_care(tmp_path_factory):
    """A random-init tiny CARE folder; its tiny-bert / tiny-qwen3 towers sit next to it."""
    from care.testing.tiny_model import make_tiny_care_model

    torch.set_num_threads(1)
    texts = [t for _, title, text in DOCS for t in (title, text) if t] + [q for _, q, _ in QUERIES]
    return make_tiny_care_model(tmp_path_factory.mktemp("tiny"), texts)


def test_the_folder_reads_as_beir_publishes_it(beir):
    corpus = load_corpus(beir.corpus)
    assert corpus[TITLE_ONLY].full_text == full_text(TITLE_ONLY) == DOCS[4][1]
    assert corpus["d1"].full_text == "高血压饮食 高血压患者应低盐饮食，每天食盐少于5克，多吃新鲜蔬菜。"
    assert corpus["d3"].metadata == metadata("d3")


def test_bench_with_bm25_and_a_dense_model(beir, tiny_care, tmp_path):
    out = tmp_path / "bench"
    _ok(["bench", "-m", "bm25", "-m", str(tiny_care), "-t", str(beir.folder), "-o", str(out), "--no-cache",
         "--no-progress", "--device", "cpu", "--batch-size", "4"])
    results = {p.name.split("__")[0]: json.loads(p.read_text(encoding="utf-8")) for p in out.glob("*__beir.json")}
    assert set(results) == {"bm25", "care"}
    for result in results.values():  # the test split's queries against every document, the title-only one too
        assert result["stats"]["n_queries"] == TEST_QUERIES and result["stats"]["n_documents"] == len(DOCS)


def test_index_build_stores_beir_documents_and_encodes_title_and_text(beir, tiny_care, tmp_path):
    from care.encoders.sides import load_side
    from care.index.bundle import open_index_folder

    output = tmp_path / "index"
    _ok(["index", "build", "-m", str(tiny_care), "-c", str(beir.corpus), "-o", str(output), "--batch-size", "4"])
    bundle = open_index_folder(output)
    stored = bundle.docstore.get(list(range(len(DOCS))))
    assert [stored[i].id for i in range(len(DOCS))] == [d[0] for d in DOCS]
    title_only = stored[4]
    assert (title_only.title, title_only.text, title_only.metadata) == (DOCS[4][1], "", metadata(TITLE_ONLY))
    expected = load_side(str(tiny_care), "document").encode_documents([full_text(d[0]) for d in DOCS])
    _, rows = bundle.index.search(np.ascontiguousarray(expected, dtype=np.float32), 1)
    assert list(rows[:, 0]) == list(range(len(DOCS)))  # each document's title + text finds itself


@pytest.mark.parametrize("train", ["train_pos", "train_positive"])
def test_mining_keeps_a_string_positive_whole(beir, tiny_care, tmp_path, train):
    from care.models.query import build_query_encoder

    model = tmp_path / "st"
    build_query_encoder(tiny_care.parent / "tiny-bert", pooling="mean", max_seq_length=32).save(str(model))
    mined = tmp_path / "mined.jsonl"
    _ok(["train", "mine", "--train", str(getattr(beir, train)), "--corpus", str(beir.corpus), "--model", str(model),
         "-o", str(mined), "-n", "2", "--depth", "8", "--margin", "0"])
    documents = {full_text(d[0]) for d in DOCS}
    rows = _rows(mined)
    assert [r["query"] for r in rows] == [q for _, q, _ in QUERIES]
    for row, (_, _, doc_id) in zip(rows, QUERIES):
        assert row["pos"] == [full_text(doc_id)]  # the whole answer, not its first character
        assert row["neg"] and set(row["neg"]) <= documents - {full_text(doc_id)}


def test_recipe_mines_stage2_negatives_from_the_beir_corpus(beir, tiny_care, tmp_path):
    out = tmp_path / "recipe"
    towers = tiny_care.parent
    _ok(["train", "recipe", "--query-model", str(towers / "tiny-bert"), "--document-model", str(towers / "tiny-qwen3"),
         "--train", str(beir.train_positive), "--corpus", str(beir.corpus), "--mine-negatives", "1", "--mine-depth", "5",
         "-o", str(out), "--skip-query-init", "--skip-document-init", "--skip-stage1",
         *(f"--set={o}" for o in ("optim.max_steps=1", "optim.batch_size=4", "data.n_negatives=1", "runtime.log_with=null",
                                  "runtime.progress_bar=false", "runtime.cpu=true", "model.query_max_seq_length=24",
                                  "model.document_max_seq_length=32", "model.lora.r=4", "model.lora.alpha=8"))])
    rows = _rows(out / "stage2_train.jsonl")
    documents = {full_text(d[0]) for d in DOCS}
    assert [r["pos"] for r in rows] == [[full_text(d)] for _, _, d in QUERIES]
    assert all(len(r["neg"]) == 1 and r["neg"][0] in documents - set(r["pos"]) for r in rows)
    assert (out / "stage2" / "model").is_dir()


def test_curate_builders_and_audit(beir, tmp_path):
    judges = tmp_path / "judges.yaml"  # e5's cosines here are 0.8-0.95: everything is at least A (positive)
    judges.write_text("cache: judgments.sqlite\njudges:\n  - {id: e5, kind: embedding, encoder: e5, "
                      "thresholds: {S: 0.9, A: 0.5, B: 0.4, C: 0.3}}\n", encoding="utf-8")
    task = tmp_path / "task"
    _ok(["curate", "build-benchmark", "--corpus", str(beir.corpus), "--queries", str(beir.queries), "-r", "bm25",
         "-j", str(judges), "-o", str(task), "--depth", "3", "--no-progress"])
    written, original = load_corpus(task / "corpus.jsonl"), load_corpus(beir.corpus)
    assert list(written) == list(original)
    assert all((written[i].title, written[i].text, written[i].metadata) == (d.title, d.text, d.metadata)
               for i, d in original.items())
    train = tmp_path / "train.jsonl"
    _ok(["curate", "build-train", "--corpus", str(beir.corpus), "--queries", str(beir.queries), "-r", "bm25",
         "-j", str(judges), "-o", str(train), "--depth", "3", "--no-progress"])
    documents = {full_text(d[0]) for d in DOCS}
    rows = _rows(train)
    assert rows and all(set(r["pos"]) <= documents for r in rows)  # judged and written as title + text
    _ok(["curate", "audit", str(beir.folder), "-r", "bm25", "-j", str(judges), "-o", str(tmp_path / "audit"),
         "--top-k", "3", "--no-progress"])
    assert (tmp_path / "audit" / "audit_report.json").is_file()


def test_e5_vocabulary_from_beir_and_training_files(beir, tmp_path):
    from transformers import AutoTokenizer

    out = tmp_path / "e5"
    _ok(["model", "export-e5", "-o", str(out), "--layers", "1", "--vocab-from", str(beir.corpus),
         "--vocab-from", str(beir.queries), "--vocab-from", str(beir.train_pos)])
    tokenizer = AutoTokenizer.from_pretrained(out)
    for doc_id, _, _ in DOCS:  # every document as encoded (title + text) segments without unknown pieces
        assert tokenizer.unk_token_id not in tokenizer("passage: " + full_text(doc_id))["input_ids"]


def test_care_run_on_the_beir_folder(beir, tmp_path):
    config = tmp_path / "run.yaml"
    config.write_text(json.dumps({
        "inputs": {"train_file": str(beir.train_pos), "tasks": [str(beir.folder)]},
        "curate": {"encoder": "hashing", "n_negatives": 1},
        "models": {"query": "tiny", "document": "tiny", "references": {"BM25": "bm25"}},
        "recipes": {"care": {"epochs": 1, "batch_size": 4, "max_train_examples": 8, "query_max_length": 24,
                             "document_max_length": 32, "init_negatives": 1, "stage2_negatives": 1}},
        "evaluate": {"latency_queries": 2, "latency_rounds": 1}, "show_progress": False,
    }), encoding="utf-8")
    folder = tmp_path / "run"
    _ok(["run", str(config), "-o", str(folder), "--no-progress", "--allow-dirty"])  # the checkout may be edited
    results = json.loads((folder / "results.json").read_text(encoding="utf-8"))
    assert {r["model"] for r in results["rows"]} >= {"BM25", "CARE"}
    assert all("beir" in r["scores"] for r in results["rows"])
    train = _rows(folder / "label" / "train.jsonl")
    assert [r["pos"] for r in train] == [[full_text(d)] for _, _, d in QUERIES]  # "pos": "..." read whole
    from care.index.bundle import open_index_folder

    stored = open_index_folder(folder / "index").docstore.get([4])[4]
    assert (stored.id, stored.title, stored.metadata) == (TITLE_ONLY, DOCS[4][1], metadata(TITLE_ONLY))
