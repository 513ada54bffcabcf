"""Streaming text files line by line, with a position that a checkpoint saves and resume restores exactly.

:class:`TextStream` reads one or more ``.txt`` / ``.jsonl`` files in order, one line at a time (a file
is never loaded whole), turns each line into a record with a parser (:func:`parse_text` for
RetroMAE, :class:`PairParser` for contrastive pairs; blank lines are skipped), and optionally mixes
records through a seeded shuffle buffer. Its position — epoch, file, byte offset, line number,
records served this epoch, the shuffle buffer and its RNG — is a small JSON-able dict
(:meth:`TextStream.state_dict`), so a run killed after a checkpoint continues with exactly the record
that the uninterrupted run would have read next, and every record is served exactly once per epoch.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from torch.utils.data import IterableDataset

from care.data.errors import DataFormatError
from care.data.fields import require_text
from care.data.retrieval import is_title_only
from care.data.text_rules import has_visible

#: File suffixes read as JSON lines; anything else is plain text, one record per line.
JSONL_SUFFIXES: tuple[str, ...] = (".jsonl", ".json")

Record = Any
#: ``parse(path, line_number, line_text) -> record`` or ``None`` to skip the line.
Parser = Callable[[Path, int, str], Record]


def is_jsonl(path: str | Path) -> bool:
    return Path(path).suffix.lower() in JSONL_SUFFIXES


def _json_object(path: Path, line: int, text: str) -> dict[str, Any]:
    from care.data.io import decode_json_object

    return decode_json_object(path, line, text, '{"text": ...}')


class TextParser:
    """RetroMAE records: a plain-text line as is, or the ``text_field`` of a JSONL object (a BEIR title-only
    document, :func:`care.data.retrieval.is_title_only`, is skipped like a blank line)."""

    def __init__(self, text_field: str = "text") -> None:
        self.text_field = text_field

    def __call__(self, path: Path, line: int, text: str) -> str | None:
        if not has_visible(text):
            return None
        if not is_jsonl(path):
            return text.strip()
        obj = _json_object(path, line, text)
        if is_title_only(obj, self.text_field):  # BEIR's title-only document: no text to read, as the corpus reader has it
            return None
        return require_text(obj, self.text_field, path, line).strip()


class PairParser:
    """Contrastive records: ``(a, b)`` from two JSONL fields (a list value contributes its first item)."""

    def __init__(self, fields: Sequence[str] = ("title", "content")) -> None:
        if len(fields) != 2:
            raise ValueError(f"a pair needs two field names, got {list(fields)}")
        self.fields = tuple(fields)

    def _field(self, obj: dict[str, Any], key: str, path: Path, line: int) -> str:
        value = obj.get(key)
        if isinstance(value, list):
            if not value:
                raise DataFormatError(path, "empty list", line=line, field=key, hint="give at least one text")
            value = value[0]
            obj = {key: value}
        return require_text(obj, key, path, line).strip()

    def __call__(self, path: Path, line: int, text: str) -> tuple[str, str] | None:
        if not text.strip():
            return None
        if not is_jsonl(path):
            raise DataFormatError(path, "contrastive pairs must be a JSONL file", line=line,
                                  hint=f'write one object per line with the fields {list(self.fields)}, '
                                       'and name the file *.jsonl')
        obj = _json_object(path, line, text)
        return self._field(obj, self.fields[0], path, line), self._field(obj, self.fields[1], path, line)


class TextStream(IterableDataset):
    """Records of ``files`` in order, one line at a time, with an exactly restorable position.

    Args:
        files: text/JSONL files, read in this order every epoch.
        parser: line -> record (or ``None`` to skip).
        seed: seeds the shuffle buffer of epoch ``e`` with ``Random(f"{seed}:{e}")``.
        shuffle_buffer: records held for shuffling (0 = file order).

    Use :meth:`read` for up to ``n`` records of the current epoch (fewer at its end, none after it),
    then :meth:`next_epoch`. Iterating the dataset yields the rest of the current epoch.
    """

    def __init__(self, files: Sequence[str | Path], parser: Parser, *, seed: int = 0, shuffle_buffer: int = 0) -> None:
        if not files:
            raise ValueError("TextStream needs at least one file")
        self.files = [Path(f) for f in files]
        for path in self.files:
            if not path.is_file():
                raise DataFormatError(path, "file not found", hint="check data.train_files")
        self.parser = parser
        self.seed = seed
        self.shuffle_buffer = shuffle_buffer
        self._fh = None
        self._start_epoch(0)

    # ------------------------------------------------------------------ position
    def _start_epoch(self, epoch: int) -> None:
        self._close()
        self.epoch = epoch
        self.file_index = 0
        self.offset = 0          # byte offset of the next unread line of files[file_index]
        self.line = 0            # lines of files[file_index] already read
        self.records = 0         # records served this epoch
        self.buffer: list[Record] = []
        self.rng = random.Random(f"{self.seed}:{epoch}")

    def next_epoch(self) -> None:
        """Start the next pass over the files."""
        self._start_epoch(self.epoch + 1)

    @property
    def exhausted(self) -> bool:
        """True when the current epoch has served every record."""
        return self.file_index >= len(self.files) and not self.buffer

    def state_dict(self) -> dict[str, Any]:
        """The position as plain JSON data (records, the shuffle buffer, its RNG state)."""
        version, internal, gauss = self.rng.getstate()
        return {"epoch": self.epoch, "file_index": self.file_index, "offset": self.offset, "line": self.line,
                "records": self.records, "buffer": list(self.buffer),
                "rng": [version, list(internal), gauss], "files": [str(f) for f in self.files]}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue exactly where :meth:`state_dict` was taken (same files required)."""
        files = [str(f) for f in self.files]
        if state.get("files") is not None and [Path(f).name for f in state["files"]] != [Path(f).name for f in files]:
            raise DataFormatError(self.files[0], f"the checkpoint was taken on other files {state['files']}",
                                  hint="resume with the same data.train_files, or start a new output_dir")
        self._close()
        self.epoch = int(state["epoch"])
        self.file_index, self.offset, self.line = int(state["file_index"]), int(state["offset"]), int(state["line"])
        self.records = int(state["records"])
        self.buffer = [tuple(r) if isinstance(r, list) else r for r in state["buffer"]]
        version, internal, gauss = state["rng"]
        self.rng = random.Random()
        self.rng.setstate((version, tuple(internal), gauss))

    # ------------------------------------------------------------------ reading
    def _close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None

    def _read_raw(self) -> Record | None:
        """The next parsed record in file order, or ``None`` when every file is read."""
        while self.file_index < len(self.files):
            path = self.files[self.file_index]
            if self._fh is None:
                self._fh = path.open("rb")
                self._fh.seek(self.offset)
            raw = self._fh.readline()
            if not raw:
                self._close()
                self.file_index += 1
                self.offset = self.line = 0
                continue
            self.offset += len(raw)
            self.line += 1
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise DataFormatError(path, f"not valid UTF-8 ({exc.reason} at byte {exc.start})", line=self.line,
                                      hint="re-encode the file as UTF-8, e.g. `iconv -f GB18030 -t UTF-8 in > out`") from None
            if self.line == 1:
                text = text.lstrip("\ufeff")
            record = self.parser(path, self.line, text.rstrip("\r\n"))
            if record is not None:
                return record
        return None

    def _next(self) -> Record | None:
        if self.shuffle_buffer <= 0:
            record = self._read_raw()
        else:
            while len(self.buffer) < self.shuffle_buffer and self.file_index < len(self.files):
                raw = self._read_raw()
                if raw is not None:
                    self.buffer.append(raw)
            if not self.buffer:
                return None
            j = self.rng.randrange(len(self.buffer))
            self.buffer[j], self.buffer[-1] = self.buffer[-1], self.buffer[j]
            record = self.buffer.pop()
        if record is not None:
            self.records += 1
        return record

    def read(self, n: int) -> list[Record]:
        """Up to ``n`` records of the current epoch (an empty list once it is over)."""
        out: list[Record] = []
        while len(out) < n:
            record = self._next()
            if record is None:
                break
            out.append(record)
        return out

    def __iter__(self) -> Iterator[Record]:
        while (record := self._next()) is not None:
            yield record

    def count_records(self) -> int:
        """Records in one epoch (a separate pass over the files; validates every line)."""
        probe = TextStream(self.files, self.parser, seed=self.seed)
        return sum(1 for _ in probe)
