"""care.data.retrieval: corpus / queries / qrels validation naming file, line and field."""

import pytest

from care.data.errors import DataFormatError
from care.data.retrieval import (
    Document,
    load_corpus,
    load_qrels,
    load_queries,
    load_retrieval_folder,
    write_retrieval_folder,
)


def _write(path, text):
    path.write_text(text, encoding="utf-8")
    return path


def test_duplicate_corpus_id(tmp_path):
    path = _write(tmp_path / "corpus.jsonl", '{"id": "d1", "text": "a"}\n{"id": "d2", "text": "b"}\n{"id": "d1", "text": "c"}\n')
    with pytest.raises(DataFormatError) as err:
        load_corpus(path)
    assert err.value.line == 3 and err.value.field == "id" and "first seen on line 1" in str(err.value)


def test_duplicate_query_id(tmp_path):
    path = _write(tmp_path / "queries.jsonl", '{"id": 7, "text": "a"}\n{"id": "7", "text": "b"}\n')
    with pytest.raises(DataFormatError, match="line 2, field 'id': duplicate id '7'"):
        load_queries(path)


@pytest.mark.parametrize("row, message", [
    ('{"id": "d1", "text": "   "}', r"field 'text': no visible text \(empty, or only whitespace"),
    ('{"id": "d1", "text": ""}', "field 'text': no visible text"),
    ('{"id": "d1", "text": "\\u200b\\ufeff\\u0001"}', "field 'text': no visible text"),
    ('{"id": "d1", "title": "\\u200b", "text": ""}', "field 'text': no visible text"),
    ('{"id": "d1"}', "field 'text': missing field"),
    ('{"id": "d1", "text": 5}', "field 'text': expected a string, got int"),
    ('{"id": true, "text": "a"}', "field 'id': id must be a string, got bool"),
    ('{"id": "d1", "text": "a", "title": 3}', "field 'title': title must be a string"),
])
def test_bad_corpus_rows(tmp_path, row, message):
    path = _write(tmp_path / "corpus.jsonl", '{"id": "d0", "text": "ok"}\n' + row + "\n")
    with pytest.raises(DataFormatError, match=f"line 2, {message}"):
        load_corpus(path)


def test_an_invisible_query_loads_for_the_benchmark_to_refuse_but_an_invisible_document_does_not(tmp_path):
    """A query of zero-width characters is the benchmark's to refuse by name (care.bench.query_check); a document
    of them would be encoded as the empty text and score alike against every query, so loading stops on it."""
    queries = _write(tmp_path / "queries.jsonl", '{"id": "q1", "text": "\\u200b"}\n')
    assert load_queries(queries) == {"q1": "\u200b"}
    corpus = _write(tmp_path / "corpus.jsonl", '{"id": "d1", "text": "\\u200b"}\n')
    with pytest.raises(DataFormatError, match="line 1, field 'text': no visible text"):
        load_corpus(corpus)


def test_empty_corpus(tmp_path):
    with pytest.raises(DataFormatError, match="no documents"):
        load_corpus(_write(tmp_path / "corpus.jsonl", "\n"))


def test_qrels_unknown_ids(tmp_path):
    path = _write(tmp_path / "qrels.tsv", "query-id\tcorpus-id\tscore\nq1\td1\t1\nq1\td9\t1\n")
    with pytest.raises(DataFormatError, match="line 3, field 'corpus-id': unknown corpus id 'd9'"):
        load_qrels(path, query_ids=["q1"], corpus_ids=["d1"])
    with pytest.raises(DataFormatError, match="line 2, field 'query-id': unknown query id 'q1'"):
        load_qrels(path, query_ids=["q2"], corpus_ids=["d1", "d9"])


@pytest.mark.parametrize("row, message", [
    ("q1\td1\thigh", "line 2, field 'score': score 'high' is not an integer"),
    ("q1\td1\t0.5", "line 2, field 'score': score '0.5' is not an integer"),
    ("q1\td1\t-1", "line 2, field 'score': negative score -1"),
    ("q1\td1", "line 2: expected 3 tab-separated columns, found 2"),
])
def test_qrels_bad_rows(tmp_path, row, message):
    path = _write(tmp_path / "qrels.tsv", f"query-id\tcorpus-id\tscore\n{row}\n")
    with pytest.raises(DataFormatError, match=message):
        load_qrels(path)


def test_qrels_duplicate_pair_and_graded(tmp_path):
    path = _write(tmp_path / "qrels.tsv", "q1\td1\t2\nq1\td2\t0\n")  # no header is fine
    assert load_qrels(path) == {"q1": {"d1": 2, "d2": 0}}
    _write(path, "q1\td1\t2\nq1\td1\t1\n")
    with pytest.raises(DataFormatError, match=r"line 2, field 'corpus-id': pair \(q1, d1\) listed twice — keep one "
                                              r"row per pair, with its grade \(the other says 2\)"):
        load_qrels(path)


@pytest.mark.parametrize("text, hint", [
    ("query_id\tdoc_id\tscore\nq1\td1\t1\n", "line 1 looks like a header: spell it 'query-id\\tcorpus-id\\tscore'"),
    ("query-id\tcorpus-id\tscore\nq1\td1\t1.0\n", "write 1.0 as 1"),
])
def test_qrels_score_errors_say_how_to_fix(tmp_path, text, hint):
    """A header spelt otherwise, or a float grade, said only "score ... is not an integer"."""
    path = _write(tmp_path / "qrels.tsv", text)
    with pytest.raises(DataFormatError) as error:
        load_qrels(path)
    assert hint in str(error.value)


def test_folder_round_trip_split_and_unjudged_queries(tmp_path):
    folder = tmp_path / "task"
    write_retrieval_folder(folder, [Document("d1", "高血压", title="心内科", metadata={"dept": "心内"}),
                                    Document("d2", "糖尿病")],
                           {"q1": "血压高", "q2": "无标注"}, {"q1": {"d1": 1}})
    data = load_retrieval_folder(folder)
    assert list(data.queries) == ["q1"], "queries without qrels are dropped"
    assert data.corpus["d1"].full_text == "心内科 高血压" and data.corpus["d1"].metadata == {"dept": "心内"}
    _write(folder / "test_queries.jsonl", '{"id": "q2", "text": "无标注"}\n')
    _write(folder / "test_qrels.tsv", "query-id\tcorpus-id\tscore\nq2\td2\t1\n")
    assert load_retrieval_folder(folder, split="test").qrels == {"q2": {"d2": 1}}


def test_missing_folder_and_no_judged_query(tmp_path):
    with pytest.raises(DataFormatError, match="task folder not found"):
        load_retrieval_folder(tmp_path / "nope")
    folder = tmp_path / "t"
    write_retrieval_folder(folder, [Document("d1", "a")], {"q1": "b"}, {})
    with pytest.raises(DataFormatError, match="no query has a qrels row"):
        load_retrieval_folder(folder)


def test_beir_rows_and_splits(tmp_path):
    folder = tmp_path / "beir"
    (folder / "qrels").mkdir(parents=True)
    _write(folder / "corpus.jsonl", '{"_id": "d1", "title": "", "text": "高血压", "metadata": {}}\n'
                                    '{"_id": "d2", "title": "只有标题", "text": ""}\n')
    _write(folder / "queries.jsonl", '{"_id": "q1", "text": "血压高", "metadata": {}}\n{"_id": "q2", "text": "标题"}\n')
    _write(folder / "qrels" / "test.tsv", "query-id\tcorpus-id\tscore\nq1\td1\t1\nq2\td2\t2\n")
    _write(folder / "qrels" / "dev.tsv", "query-id\tcorpus-id\tscore\nq2\td2\t1\n")
    data = load_retrieval_folder(folder)  # no qrels.tsv: BEIR's test split
    assert data.qrels == {"q1": {"d1": 1}, "q2": {"d2": 2}} and data.corpus["d2"].full_text == "只有标题"
    assert data.corpus["d1"].metadata == {"metadata": {}} and data.corpus["d2"].metadata == {}
    assert load_retrieval_folder(folder, split="dev").qrels == {"q2": {"d2": 1}}
    with pytest.raises(DataFormatError, match=r"no qrels for split 'train'.*its splits are: dev, test"):
        load_retrieval_folder(folder, split="train")
    _write(folder / "queries.jsonl", '{"id": "q1", "_id": "q9", "text": "血压高"}\n')
    with pytest.raises(DataFormatError, match="line 1, field 'id': 'id' 'q1' and '_id' 'q9' differ"):
        load_queries(folder / "queries.jsonl")


def test_a_missing_split_is_refused_not_replaced(tmp_path):
    folder = tmp_path / "task"
    write_retrieval_folder(folder, [Document("d1", "高血压")], {"q1": "血压高"}, {"q1": {"d1": 1}})
    with pytest.raises(DataFormatError, match="no qrels for split 'dev'.*only the default qrels.tsv"):
        load_retrieval_folder(folder, split="dev")
