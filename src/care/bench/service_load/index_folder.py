"""A servable index folder (what ``care index build`` writes: FAISS index, document store, manifest) over a file of
vectors that no corpus produced: the million-vector set of :mod:`care.bench.search_1m` (real e5 passage vectors of a
dev corpus first, clustered synthetic ones after), so that ``care serve`` and ``care bench service-load`` can serve it.

Row ``i`` of the vectors is document ``i``: the corpus's documents for the first rows (in file order), a placeholder
text for the synthetic rest. The FAISS index is built here, or taken from a finished build of the same vectors
(``prebuilt``: a folder with ``index.faiss`` + ``index.json``, linked rather than copied) with its search settings
(``nprobe``, ``refine_k_factor``) replaced by ``index_config``'s.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from care.data.retrieval import Document
from care.errors import CareError
from care.index.config import IndexConfig

logger = logging.getLogger(__name__)

#: Vectors added to a FAISS index per call (bounded memory while building).
ADD_BLOCK = 100_000
#: The text of a synthetic row's document.
SYNTHETIC_TEXT = "synthetic document {row}"
#: Search-time settings a prebuilt index takes from ``index_config``.
SEARCH_SETTINGS = ("nprobe", "refine_k_factor", "ef_search")


def _documents(corpus: Path, n_rows: int) -> Iterator[tuple[int, Document]]:
    from care.data.retrieval import iter_documents

    real = iter_documents(corpus)
    for row in range(n_rows):
        doc = next(real, None)
        yield row + 1, doc if doc is not None else Document(id=f"synthetic-{row}", text=SYNTHETIC_TEXT.format(row=row))


def _link_prebuilt(prebuilt: Path, out: Path, config: IndexConfig) -> None:
    from care.index.faiss_index import INDEX_FILE, META_FILE

    meta = json.loads((prebuilt / META_FILE).read_text(encoding="utf-8"))
    stored = meta["config"]
    mismatch = {k: (stored.get(k), v) for k, v in config.to_dict().items()
                if k not in SEARCH_SETTINGS and stored.get(k) != v}
    if mismatch:
        raise CareError(f"{prebuilt}: the prebuilt index was built with other settings ({mismatch}: built, asked)")
    out.mkdir(parents=True, exist_ok=True)
    try:
        os.link(prebuilt / INDEX_FILE, out / INDEX_FILE)
    except OSError:
        shutil.copyfile(prebuilt / INDEX_FILE, out / INDEX_FILE)
    (out / META_FILE).write_text(json.dumps({**meta, "config": config.to_dict()}), encoding="utf-8")


def servable_index_folder(vectors: Path, out: Path, corpus: Path, config: IndexConfig, *,
                          prebuilt: Path | None = None, model: str = "e5") -> Path:
    """``out`` as a servable index folder over ``vectors`` (an ``.npy`` matrix); kept when already complete.

    Args:
        vectors: ``(n, dim)`` float32 ``.npy`` (memory-mapped).
        out: the folder to write (its manifest last: a folder with one is complete).
        corpus: ``corpus.jsonl`` whose documents are the first rows.
        config: the FAISS index's settings (search settings included).
        prebuilt: a finished FAISS build of the same vectors to link instead of building.
        model: the model named in the manifest (the encoder of the real rows).
    """
    from care.encoders.fingerprint import file_sha256
    from care.index.docstore import build_docstore
    from care.index.faiss_index import build_index
    from care.index.integrity import files_under, record_files
    from care.index.manifest import DOCSTORE_FILE, INDEX_DIR, IndexManifest

    if (out / "manifest.json").is_file():
        return out
    matrix = np.load(vectors, mmap_mode="r")
    n, dim = matrix.shape
    if prebuilt is not None:
        _link_prebuilt(prebuilt, out / INDEX_DIR, config)
    else:
        index = build_index(config, dim)
        for start in range(0, n, ADD_BLOCK):
            index.add(np.ascontiguousarray(matrix[start : start + ADD_BLOCK]))
        index.save(out / INDEX_DIR)
    build_docstore(out / DOCSTORE_FILE, _documents(corpus, n), source=str(corpus))
    files = record_files(out, [*files_under(out, INDEX_DIR), DOCSTORE_FILE])
    IndexManifest(model=model, model_identity=model, encoder_fingerprint=f"vectors:{vectors.name}", corpus=str(corpus),
                  corpus_sha256=file_sha256(corpus), instruction=None, dim=int(dim), n_docs=int(n), backend="faiss",
                  index={"type": "faiss", **config.to_dict()}, files=files).save(out)
    logger.info("servable index folder %s: %d documents, %d-d", out, n, dim)
    return out
