"""The document store (care.index.docstore): read-only, SQLite's quick_check, and read failures that are errors
rather than fewer documents."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from care.data.retrieval import Document
from care.index.docstore import DocumentReadError, DocumentStore, build_docstore
from care.index.integrity import IndexDamagedError

#: Documents in the test store: enough for the docs table to span pages.
N_DOCS = 200
PAGE = 4096


def _store(path: Path) -> Path:
    docs = ((i + 1, Document(id=f"d{i}", text="头痛发热" * 40, title=f"t{i}", metadata={"n": i})) for i in range(N_DOCS))
    assert build_docstore(path, docs) == N_DOCS
    return path


def test_an_intact_store_passes_its_check_and_returns_every_row_asked(tmp_path):
    store = DocumentStore(_store(tmp_path / "a?b#c%d.sqlite"))  # URI characters in the name are escaped
    store.check()
    got = store.get([0, 57, N_DOCS - 1, -1])
    assert sorted(got) == [0, 57, N_DOCS - 1] and got[57].id == "d57" and got[57].metadata == {"n": 57}


def test_the_store_is_opened_read_only(tmp_path):
    store = DocumentStore(_store(tmp_path / "s.sqlite"))
    with pytest.raises(sqlite3.OperationalError, match="readonly"):
        store._conn().execute("DELETE FROM docs")


def test_a_damaged_page_fails_quick_check_and_reads_raise(tmp_path):
    path = _store(tmp_path / "s.sqlite")
    data = bytearray(path.read_bytes())
    for i in range(PAGE, PAGE + 16):  # the header of the docs table's root page
        data[i] ^= 0xFF
    path.write_bytes(bytes(data))
    store = DocumentStore(path)  # COUNT(*) reads the id index and still works
    with pytest.raises(IndexDamagedError, match=r"s\.sqlite is damaged: SQLite's quick_check reports .*care index build"):
        store.check()
    with pytest.raises(DocumentReadError, match=r"s\.sqlite failed to read rows \[0, 1, 2\]\.\.\. \(DatabaseError"):
        store.get(list(range(10)))


def test_a_flipped_byte_inside_a_documents_text_passes_quick_check_but_fails_its_first_read(tmp_path):
    path = tmp_path / "s.sqlite"
    docs = [(i + 1, Document(id=f"d{i}", text=f"第{i}号文档的正文" * 5, title=f"t{i}")) for i in range(N_DOCS)]
    build_docstore(path, docs)
    data = bytearray(path.read_bytes())
    at = data.find("第57号文档".encode())
    data[at : at + 3] = "弟".encode()  # same length, valid UTF-8: a row SQLite reads, with other text
    path.write_bytes(bytes(data))
    store = DocumentStore(path)
    store.check()  # SQLite keeps no checksum of row contents
    assert store.get([56])[56].id == "d56"  # other rows read as before
    with pytest.raises(DocumentReadError, match="row 57's content does not match its checksum"):
        store.get([56, 57])


def test_a_store_from_before_row_checksums_is_read_with_a_warning(tmp_path, caplog):
    import logging

    path = tmp_path / "old.sqlite"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE docs (row INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE, title TEXT NOT NULL, "
                 "text TEXT NOT NULL, meta TEXT NOT NULL)")
    conn.execute("INSERT INTO docs VALUES (0, 'd0', 't', '头痛', '{}')")
    conn.commit()
    conn.close()
    with caplog.at_level(logging.WARNING, logger="care.index.docstore"):
        store = DocumentStore(path)
    assert "predates row checksums" in caplog.text
    assert store.get([0])[0].text == "头痛"
