"""care.data.io: line-numbered JSONL errors, UTF-8 checks, atomic writers."""

import json

import pytest

from care.data.errors import DataFormatError
from care.data.io import atomic_write, iter_jsonl, iter_text_lines, write_json, write_jsonl


def test_malformed_jsonl_names_the_line(tmp_path):
    path = tmp_path / "x.jsonl"
    path.write_text('{"id": 1}\n\n{"id": 2,\n', encoding="utf-8")
    with pytest.raises(DataFormatError) as err:
        list(iter_jsonl(path))
    assert err.value.line == 3 and "malformed JSON" in str(err.value) and str(path) in str(err.value)


def test_non_object_line_rejected(tmp_path):
    path = tmp_path / "x.jsonl"
    path.write_text('{"id": 1}\n[1, 2]\n', encoding="utf-8")
    with pytest.raises(DataFormatError, match="line 2: expected a JSON object, got list"):
        list(iter_jsonl(path))


def test_non_utf8_file_names_line_and_suggests_iconv(tmp_path):
    path = tmp_path / "gbk.jsonl"
    path.write_bytes(b'{"text": "ok"}\n' + '{"text": "高血压"}\n'.encode("gb18030"))
    with pytest.raises(DataFormatError, match="line 2: not valid UTF-8.*iconv"):
        list(iter_jsonl(path))


def test_bom_and_crlf_are_tolerated(tmp_path):
    path = tmp_path / "bom.jsonl"
    path.write_bytes("\ufeff{\"a\": 1}\r\n{\"a\": 2}\r\n".encode())
    assert [obj["a"] for _, obj in iter_jsonl(path)] == [1, 2]
    assert [line for _, line in iter_text_lines(path)] == ['{"a": 1}', '{"a": 2}']


def test_missing_file(tmp_path):
    with pytest.raises(DataFormatError, match="file not found"):
        list(iter_jsonl(tmp_path / "nope.jsonl"))


def test_a_folder_given_for_a_file_is_named_so(tmp_path):
    """A task folder passed as --corpus said 'file not found — check the path, or create the file' of a path
    that exists; it now says it is a folder and names the data files inside."""
    (tmp_path / "corpus.jsonl").write_text('{"id": "1", "text": "头痛"}\n', encoding="utf-8")
    with pytest.raises(DataFormatError, match=r"is a folder, not a file — give a file inside it \(corpus.jsonl\)"):
        list(iter_jsonl(tmp_path))


def test_atomic_write_leaves_nothing_on_exception(tmp_path):
    target = tmp_path / "out.json"
    target.write_text("old", encoding="utf-8")
    with pytest.raises(RuntimeError):
        with atomic_write(target) as fh:
            fh.write("half")
            raise RuntimeError("crash mid-write")
    assert target.read_text(encoding="utf-8") == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.json"], "no temporary file left behind"

    fresh = tmp_path / "sub" / "new.jsonl"
    with pytest.raises(RuntimeError):
        write_jsonl(fresh, ({"i": i} if i < 2 else (_ for _ in ()).throw(RuntimeError("boom")) for i in range(3)))
    assert not fresh.exists() and list(fresh.parent.iterdir()) == []


def test_writers_round_trip_non_ascii(tmp_path):
    assert write_jsonl(tmp_path / "a.jsonl", [{"t": "头痛"}, {"t": "发烧"}]) == 2
    assert "头痛" in (tmp_path / "a.jsonl").read_text(encoding="utf-8")
    write_json(tmp_path / "b.json", {"t": "胃痛"})
    assert json.loads((tmp_path / "b.json").read_text(encoding="utf-8")) == {"t": "胃痛"}


def test_atomic_writes_get_the_mode_a_plain_open_would(tmp_path):
    """mkstemp makes its file 0o600; renamed into place it must not stay unreadable to the group."""
    import stat

    import numpy as np

    from care.encoders.cache import CacheKey, EmbeddingCache

    plain = tmp_path / "plain.txt"
    plain.write_text("x")
    expected = stat.S_IMODE(plain.stat().st_mode)
    write_json(tmp_path / "a.json", {"a": 1})
    assert stat.S_IMODE((tmp_path / "a.json").stat().st_mode) == expected
    cache = EmbeddingCache(tmp_path / "cache")
    key = CacheKey(fingerprint="f" * 64, role="document", instruction=None, content="c" * 64, n_rows=2)
    cache.store(key, np.zeros((2, 3), dtype=np.float32))
    for path in (tmp_path / "cache").rglob("*"):
        if path.is_file():
            assert stat.S_IMODE(path.stat().st_mode) == expected, path
    # folders renamed into place (models, indexes) get the mode a plain mkdir would
    from care.models.folders import atomic_dir

    (tmp_path / "plain_dir").mkdir()
    with atomic_dir(tmp_path / "model") as tmp:
        (tmp / "x").write_text("x")
    assert stat.S_IMODE((tmp_path / "model").stat().st_mode) == stat.S_IMODE((tmp_path / "plain_dir").stat().st_mode)
