"""The generator: no drift from the shipped files, sizes, graded relevance, train/benchmark disjointness."""

from __future__ import annotations

import json
from pathlib import Path

from care.demo import DEMO_TASK_NAMES, demo_tasks_root, demo_train_file
from care.demo.build import DemoBundle, main, write_demo
from care.demo.cells import GRADE_ANSWERS, GRADE_NONE
from care.demo.config import DemoConfig


def _files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_regenerating_gives_the_shipped_files_byte_for_byte(tmp_path: Path) -> None:
    write_demo(tmp_path)
    shipped, fresh = _files(demo_tasks_root()), _files(tmp_path)
    assert sorted(fresh) == sorted(shipped)
    drifted = [name for name in shipped if shipped[name] != fresh[name]]
    assert not drifted, f"regenerate with `python -m care.demo.build --output src/care/demo/data`: {drifted}"


def test_cli_writes_the_same_files_as_the_api(tmp_path: Path) -> None:
    main(["--output", str(tmp_path / "cli"), "--seed", "7"])
    write_demo(tmp_path / "api", seed=7)
    assert _files(tmp_path / "cli") == _files(tmp_path / "api")


def test_another_seed_gives_another_benchmark(tmp_path: Path) -> None:
    write_demo(tmp_path, seed=1)
    other = (tmp_path / "CMedTEB-Demo-Retrieval" / "corpus.jsonl").read_bytes()
    assert other != (demo_tasks_root() / "CMedTEB-Demo-Retrieval" / "corpus.jsonl").read_bytes()


def test_shipped_layout_and_manifest() -> None:
    root = demo_tasks_root()
    for name in DEMO_TASK_NAMES:
        assert (root / name / "task.json").is_file()
    assert demo_train_file().is_file()
    manifest = json.loads((root / "manifest.json").read_text(encoding="utf-8"))
    assert DemoConfig.from_dict(manifest["config"]) == DemoConfig()


def test_counts_are_in_the_documented_ranges(bundle: DemoBundle) -> None:
    counts = bundle.counts()
    assert counts["conditions"] >= 20 and counts["aspects"] == 6
    assert 250 <= counts["documents"] <= 350
    assert 200 <= counts["queries"] <= 300
    assert counts["rerank_examples"] >= 150
    assert 200 <= counts["sts_pairs"] <= 300
    assert counts["synonym_groups"] >= 40
    assert counts["train_rows"] >= 300


def test_every_query_has_several_answering_documents(bundle: DemoBundle) -> None:
    answers = [sum(g == GRADE_ANSWERS for g in row.values()) for row in bundle.qrels.values()]
    assert len(answers) == len(bundle.queries)
    assert min(answers) >= 1
    assert sum(answers) / len(answers) >= 2
    assert any(g == 1 for row in bundle.qrels.values() for g in row.values())


def test_qrels_grades_follow_the_cells(bundle: DemoBundle) -> None:
    docs = {d.id: d for d in bundle.documents}
    for query in bundle.queries:
        for doc_id, grade in bundle.qrels[query.id].items():
            doc = docs[doc_id]
            if grade == GRADE_ANSWERS:
                assert doc.cell == query.cell
            else:  # partial: same condition or same aspect, never both
                assert (doc.cell.condition == query.cell.condition) != (doc.cell.aspect == query.cell.aspect)


def test_documents_vary_synonyms_so_queries_and_answers_mismatch(bundle: DemoBundle) -> None:
    mi_docs = [d.text for d in bundle.documents if d.cell.condition.key == "myocardial_infarction"]
    assert any("心梗" in t for t in mi_docs) and any("心肌梗死" in t for t in mi_docs)
    assert not any("血压高" in d.text for d in bundle.documents), "query-only colloquial form leaked into answers"


def test_train_queries_and_documents_are_disjoint_from_the_benchmark(bundle: DemoBundle) -> None:
    benchmark_texts = {q.text for q in bundle.queries} | {r.query for r in bundle.rerank}
    benchmark_texts |= {s for p in bundle.sts for s in (p.sentence1, p.sentence2)}
    assert not benchmark_texts & {row.query.text for row in bundle.train}
    assert not benchmark_texts & {row["text"] for row in bundle.raw_queries}
    assert not {d.text for d in bundle.documents} & {d.text for d in bundle.train_documents}


def test_shipped_train_file_is_disjoint_from_shipped_benchmark() -> None:
    root = demo_tasks_root()
    bench = {json.loads(line)["text"] for line in (root / "CMedTEB-Demo-Retrieval" / "queries.jsonl").open(encoding="utf-8")}
    train = [json.loads(line) for line in demo_train_file().open(encoding="utf-8")]
    assert train and not bench & {row["query"] for row in train}


def test_train_negatives_are_never_relevant_and_positives_answer(bundle: DemoBundle) -> None:
    for row in bundle.train:
        assert row.pos and all(d.cell == row.query.cell for d in row.pos)
        assert len(row.neg) == bundle.config.train_negatives
        for neg in row.neg:
            assert bundle.scheme.grade(row.query.cell, neg.cell) == GRADE_NONE
            shares = neg.cell.condition == row.query.cell.condition or neg.cell.aspect == row.query.cell.aspect
            assert shares, "negatives should be hard (same condition or same aspect)"


def test_rerank_candidates_are_answers_hard_and_easy_negatives(bundle: DemoBundle) -> None:
    cell_of_text = {d.text: d.cell for d in bundle.documents}
    cell_of_query = {q.text: q.cell for q in bundle.queries}
    for example in bundle.rerank:
        qcell = cell_of_query[example.query]
        assert all(cell_of_text[t] == qcell for t in example.positive)
        assert all(bundle.scheme.grade(qcell, cell_of_text[t]) == GRADE_NONE for t in example.negative)
        assert 8 <= len(example.positive) + len(example.negative) <= 12


def test_raw_queries_include_synthetic_personal_details(bundle: DemoBundle) -> None:
    texts = [r["text"] for r in bundle.raw_queries]
    assert len(set(texts)) == len(texts)
    assert any("电话" in t or "手机" in t or "联系方式" in t for t in texts)
