"""Streaming JSONL reading with line-numbered errors, and atomic writers.

Every writer in the package goes through :func:`atomic_write`: output is written to a
temporary file in the same folder and renamed over the target only once complete, so a
crash never leaves a half-written file behind.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any

from care.data.errors import DataFormatError
from care.errors import CareError


def _read_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


#: The modes a plain ``open(path, "w")`` / ``mkdir`` give under this process's umask (read once, at
#: import). ``tempfile.mkstemp`` / ``mkdtemp`` create 0o600 / 0o700, and a temporary renamed into place
#: keeps that mode: without these, every atomically written file or folder would be closed to the
#: user's group (a shared run folder, an index, a results file checked by a colleague).
NEW_FILE_MODE = 0o666 & ~_read_umask()
NEW_DIR_MODE = 0o777 & ~_read_umask()


def new_temporary_sibling(path: Path, suffix: str = ".tmp") -> tuple[int, str]:
    """``mkstemp`` next to ``path`` (same file system, so the rename is atomic), with the mode a new file
    would have had. Returns ``(fd, name)``."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=suffix, dir=path.parent)
    os.fchmod(fd, NEW_FILE_MODE)
    return fd, tmp


@contextlib.contextmanager
def atomic_write(path: str | Path, mode: str = "w", encoding: str | None = "utf-8") -> Iterator[IO[Any]]:
    """Open a temporary sibling of ``path`` for writing; rename it to ``path`` on success.

    Args:
        path: final destination; parent folders are created.
        mode: ``"w"`` (text) or ``"wb"`` (binary).
        encoding: text encoding (ignored for binary modes).
    Yields:
        The open temporary file. On an exception the temporary file is removed and
        ``path`` is left untouched.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = new_temporary_sibling(path)
    try:
        with os.fdopen(fd, mode, encoding=None if "b" in mode else encoding) as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def write_jsonl(path: str | Path, rows: Iterable[dict[str, Any]]) -> int:
    """Atomically write ``rows`` as UTF-8 JSON lines (non-ASCII kept readable). Returns the row count."""
    n = 0
    with atomic_write(path) as fh:
        for row in rows:
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")
            n += 1
    return n


def write_json(path: str | Path, obj: Any) -> None:
    """Atomically write one JSON document (indented, non-ASCII kept readable)."""
    with atomic_write(path) as fh:
        json.dump(obj, fh, ensure_ascii=False, indent=2)
        fh.write("\n")


def require_file(path: str | Path) -> Path:
    """``path`` as a :class:`Path` when it is a file.

    Raises:
        DataFormatError: it is missing, or a folder (the hint names a data file inside it when there is one,
            e.g. a task folder's ``corpus.jsonl``).
    """
    path = Path(path)
    if path.is_dir():
        inside = sorted(p.name for p in path.glob("*.jsonl") if p.is_file())[:3]
        raise DataFormatError(path, "is a folder, not a file",
                              hint=f"give a file inside it ({', '.join(inside)})" if inside else "give a data file")
    if not path.is_file():
        raise DataFormatError(path, "file not found", hint="check the path, or create the file")
    return path


def require_folder_path(path: str | Path, role: str, hint: str) -> Path:
    """``path`` as a :class:`Path` when it is a folder or does not exist yet (a folder is made there).

    ``role`` names the path in the message (``--output``, a model folder ...); ``hint`` says what to give instead.

    Raises:
        CareError: ``path`` is an existing file (never replaced, moved aside or written into).
    """
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise CareError(f"{role} {path} is an existing file, not a folder; {hint}")
    return path


def iter_text_lines(path: str | Path) -> Iterator[tuple[int, str]]:
    """Yield ``(line_number, line_without_newline)`` from a UTF-8 text file.

    Raises:
        DataFormatError: the file is missing, or a line is not valid UTF-8 (named by number).
    """
    path = require_file(path)
    with path.open("rb") as fh:
        for lineno, raw in enumerate(fh, start=1):
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise DataFormatError(
                    path,
                    f"not valid UTF-8 ({exc.reason} at byte {exc.start})",
                    line=lineno,
                    hint="re-encode the file as UTF-8, e.g. `iconv -f GB18030 -t UTF-8 in > out`",
                ) from None
            if lineno == 1 and text.startswith("\ufeff"):
                text = text[1:]
            yield lineno, text.rstrip("\r\n")


def decode_json_object(path: str | Path, line: int, text: str, example: str = '{"id": ..., "text": ...}') -> dict[str, Any]:
    """One JSONL line as a dict.

    Raises:
        DataFormatError: malformed JSON or not an object, naming ``path`` and ``line``; ``example``
            shows the expected shape in the hint.
    """
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as exc:
        raise DataFormatError(path, f"malformed JSON ({exc.msg} at column {exc.colno})", line=line,
                              hint="each line must be one complete JSON object") from None
    if not isinstance(obj, dict):
        raise DataFormatError(path, f"expected a JSON object, got {type(obj).__name__}", line=line,
                              hint=f"each line must be one JSON object such as {example}")
    return obj


def iter_jsonl(path: str | Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield ``(line_number, object)`` for each non-blank line of a JSONL file.

    Raises:
        DataFormatError: malformed JSON or a line that is not a JSON object, naming the line.
    """
    for lineno, line in iter_text_lines(path):
        if line.strip():
            yield lineno, decode_json_object(path, lineno, line)


def link_tree(source: str | Path, target: str | Path) -> Path:
    """``target`` as a copy of the folder ``source`` made of hard links (no extra disk; copies across file
    systems), swapped in whole: a reader never sees a half-made ``target``."""
    import shutil

    source, target = Path(source), Path(target)

    def link(src: str, dst: str) -> None:
        try:
            os.link(src, dst)
        except OSError:
            shutil.copy2(src, dst)

    tmp = target.with_name(f".{target.name}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.copytree(source, tmp, copy_function=link)
    shutil.rmtree(target, ignore_errors=True)
    os.replace(tmp, target)
    return target
