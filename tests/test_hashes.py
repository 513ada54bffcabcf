"""care.hashes is the one place care hashes content: its digests are hashlib's, and no other module calls hashlib."""

from __future__ import annotations

import ast
import hashlib

import pytest

from care.hashes import FILE_BLOCK_BYTES, SHA1, chunks_hex_digest, file_sha256, hex_digest

from .test_layers import PACKAGE_DIR, import_graph

#: The SHA-256 of b"abc" (FIPS 180-2, appendix B.1).
ABC_SHA256 = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"


def test_digests_are_the_standard_ones():
    assert hex_digest("abc") == hex_digest(b"abc") == ABC_SHA256
    assert hex_digest("abc", length=16) == ABC_SHA256[:16]
    assert hex_digest("头痛", algorithm=SHA1) == hashlib.sha1("头痛".encode()).hexdigest()
    assert chunks_hex_digest(["a", b"b", "c"]) == ABC_SHA256  # chunks hash as their concatenation
    assert chunks_hex_digest([]) == hashlib.sha256(b"").hexdigest()


@pytest.mark.parametrize("size", [0, 5, FILE_BLOCK_BYTES, FILE_BLOCK_BYTES * 2 + 3])
def test_a_file_hashes_as_its_bytes_across_blocks(tmp_path, size):
    data = bytes(i % 251 for i in range(size))
    (tmp_path / "f").write_bytes(data)
    assert file_sha256(tmp_path / "f") == hashlib.sha256(data).hexdigest()


def test_only_care_hashes_calls_hashlib_and_it_imports_nothing_of_care():
    callers = []
    for path in sorted(PACKAGE_DIR.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module] if isinstance(node, ast.ImportFrom) else [])
            if "hashlib" in names and path.name != "hashes.py":
                callers.append(str(path.relative_to(PACKAGE_DIR)))
    assert not callers, f"hash through care.hashes, not hashlib: {callers}"
    assert import_graph(PACKAGE_DIR)["care.hashes"] == set()
