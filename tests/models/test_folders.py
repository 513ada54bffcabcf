"""``care.models.folders.atomic_dir``: a model folder written in place of an existing file is refused."""

from __future__ import annotations

import pytest

from care.errors import CareError
from care.models.folders import atomic_dir


def test_an_existing_file_is_not_replaced_by_a_model_folder(tmp_path):
    """`care model build --output notes.txt` moved the user's file to a hidden .notes.txt.old."""
    target = tmp_path / "notes.txt"
    target.write_text("mine", encoding="utf-8")
    with pytest.raises(CareError, match="existing file"):
        with atomic_dir(target) as tmp:
            (tmp / "config.json").write_text("{}", encoding="utf-8")
    assert target.read_text(encoding="utf-8") == "mine"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]


def test_an_existing_folder_is_replaced_once_complete(tmp_path):
    target = tmp_path / "model"
    target.mkdir()
    (target / "old.bin").write_bytes(b"old")
    with atomic_dir(target) as tmp:
        (tmp / "new.bin").write_bytes(b"new")
    assert sorted(p.name for p in target.iterdir()) == ["new.bin"]
