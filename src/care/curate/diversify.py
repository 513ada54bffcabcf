"""``diversify``: the paper's dynamic vector-index filter against near-duplicate training texts.

The first ``seed_size`` texts seed an inner-product index unfiltered. Every later text retrieves
its top-``k`` neighbours among the texts kept so far; when *more than* ``max_similar`` of them have a
cosine similarity above ``threshold`` the text is dropped, otherwise it is kept and inserted into
the index, so later texts are compared with it too. The paper's settings: queries
``k=5, t=0.85, n=1``; documents ``k=5, t=0.78, n=1``; seed 5,000 texts.

Texts stream in chunks: a chunk is encoded at once and searched against the index; candidates of
the same chunk are also compared with the chunk's earlier kept texts, so the result is the same as
inserting one text at a time. Resume: kept rows are appended to ``<out>.partial`` and the kept
texts' vectors to ``<out>.vectors.f32`` (raw float32) after every chunk, with the progress file
recording both lengths, so a restarted run rebuilds the index from the vectors without re-encoding.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from care.curate.checkpoint import StreamCheckpoint
from care.curate.diversify_threshold import (
    CALIBRATION_MODES,
    MIN_PROFILE_TEXTS,
    calibrated_threshold,
    check_threshold,
    similarity_profile,
)
from care.data.errors import DataFormatError
from care.data.fields import require_text
from care.data.io import iter_jsonl, require_file, write_json
from care.encoders.base import Encoder
from care.errors import CareError

logger = logging.getLogger(__name__)

MAX_EXAMPLES = 20
FLOAT_BYTES = 4


#: The paper's similarity thresholds, set for the paper's encoder (see :mod:`care.curate.diversify_threshold`).
PAPER_THRESHOLDS = {"query": 0.85, "document": 0.78}


@dataclass
class DiversifyConfig:
    """Filter settings (see the module docstring); ``role`` picks the encoder role.

    ``calibration`` says how ``threshold`` meets the encoder (:mod:`care.curate.diversify_threshold`):
    ``"off"`` uses it as given; ``"check"`` (what :meth:`for_role` sets, i.e. the paper's defaults)
    refuses, before anything is written, a threshold that random pairs of the first texts already
    exceed, printing their similarity distribution and a calibrated threshold; ``"auto"`` replaces
    it by that calibrated threshold.
    """

    k: int = 5
    threshold: float = 0.78
    max_similar: int = 1
    seed_size: int = 5000
    role: str = "document"
    chunk_size: int = 512
    batch_size: int = 32
    instruction: str | None = None
    calibration: str = "off"

    @classmethod
    def for_role(cls, role: str) -> DiversifyConfig:
        """The paper's settings for ``"query"`` (t=0.85) or ``"document"`` (t=0.78), checked against the encoder."""
        if role not in PAPER_THRESHOLDS:
            raise CareError(f"diversify role must be 'query' or 'document', got {role!r}")
        return cls(threshold=PAPER_THRESHOLDS[role], role=role, calibration="check")

    def __post_init__(self) -> None:
        if self.k < 1 or self.max_similar < 0 or self.seed_size < 0 or self.chunk_size < 1:
            raise CareError("diversify: need k >= 1, max_similar >= 0, seed_size >= 0, chunk_size >= 1")
        if self.calibration not in CALIBRATION_MODES:
            raise CareError(f"diversify: calibration must be one of {', '.join(CALIBRATION_MODES)}, got {self.calibration!r}")
        if self.max_similar >= self.k:
            raise CareError(f"diversify: max_similar ({self.max_similar}) must be below k ({self.k}), "
                            "or nothing could ever be dropped")


class DynamicIndexFilter:
    """The in-memory filter: ``offer(vectors)`` returns which texts to keep and inserts them.

    Args:
        dim: embedding dimension.
        config: the filter settings.
        initial: vectors of texts kept earlier (resume), inserted without filtering.
    """

    def __init__(self, dim: int, config: DiversifyConfig, initial: np.ndarray | None = None, seen: int = 0) -> None:
        import faiss

        self.config = config
        self.index = faiss.IndexFlatIP(dim)
        self.seen = seen
        if initial is not None and len(initial):
            self.index.add(np.ascontiguousarray(initial, dtype=np.float32))

    @property
    def size(self) -> int:
        return self.index.ntotal

    def offer(self, vectors: np.ndarray) -> tuple[list[bool], list[tuple[int, float]]]:
        """Filter a chunk in order. Returns ``keep`` flags and, per text, ``(neighbour, similarity)`` of
        its nearest kept neighbour (index position; -1 when there is none)."""
        cfg = self.config
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        n = len(vectors)
        k = min(cfg.k, self.size)
        if k:
            idx_scores, idx_ids = self.index.search(vectors, k)
        else:
            idx_scores, idx_ids = np.empty((n, 0), np.float32), np.empty((n, 0), np.int64)
        intra = vectors @ vectors.T
        keep: list[bool] = []
        nearest: list[tuple[int, float]] = []
        kept_local: dict[int, int] = {}  # chunk position -> index position once inserted
        base = self.size
        for i in range(n):
            scores = list(zip(idx_scores[i].tolist(), idx_ids[i].tolist()))
            scores += [(float(intra[i, j]), pos) for j, pos in kept_local.items()]
            scores.sort(key=lambda s: -s[0])
            top = scores[:cfg.k]
            nearest.append((top[0][1], top[0][0]) if top else (-1, 0.0))
            if self.seen < cfg.seed_size:
                ok = True
            else:
                ok = sum(1 for s, _ in top if s > cfg.threshold) <= cfg.max_similar
            self.seen += 1
            keep.append(ok)
            if ok:
                kept_local[i] = base + len(kept_local)
        if kept_local:
            self.index.add(vectors[list(kept_local)])
        return keep, nearest


def _chunks(path: Path, text_field: str, start_line: int, size: int) -> Iterator[list[tuple[int, dict[str, Any], str]]]:
    chunk = []
    for line, row in iter_jsonl(path):
        if line <= start_line:
            continue
        chunk.append((line, row, require_text(row, text_field, path, line)))
        if len(chunk) >= size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def _resolve_threshold(config: DiversifyConfig, vectors: np.ndarray, encoder_name: str) -> dict[str, Any]:
    """The threshold this run uses, and the similarity profile it was judged on (for the report)."""
    if config.calibration == "off" or len(vectors) < MIN_PROFILE_TEXTS:
        if config.calibration != "off":
            logger.warning("diversify: only %d texts in the first chunk; threshold %s used as given",
                           len(vectors), config.threshold)
        return {"threshold": config.threshold}
    profile = similarity_profile(vectors)
    logger.info("diversify: %s", profile.describe())
    if config.calibration == "check":
        check_threshold(config.threshold, vectors, profile, encoder=encoder_name, role=config.role)
        return {"threshold": config.threshold, "similarity_profile": profile.to_dict()}
    threshold = calibrated_threshold(config.threshold, profile)
    logger.info("diversify: threshold %s calibrated to %s for %s", config.threshold, threshold, encoder_name)
    return {"threshold": threshold, "similarity_profile": profile.to_dict()}


def diversify_file(
    input_path: str | Path,
    output_path: str | Path,
    encoder: Encoder,
    config: DiversifyConfig | None = None,
    *,
    text_field: str = "text",
    report_path: str | Path | None = None,
    show_progress: bool = True,
) -> dict[str, Any]:
    """Keep the rows of ``input_path`` that pass the filter; write them (unchanged) to ``output_path``.

    Returns the report ``{"seen", "kept", "dropped", "kept_ratio", "threshold", "similarity_profile"?,
    "encoder", "config", "examples"}`` where ``threshold`` is the one applied (calibrated when
    ``config.calibration == "auto"``) and examples show dropped texts with their most similar kept text.

    Raises:
        CareError: with ``calibration="check"``, a threshold the encoder's random pairs already exceed
            (nothing is written; the message gives the measured distribution and a suggested threshold).
    """
    config = config or DiversifyConfig()
    input_path = require_file(input_path)  # before any checkpoint file is made next to the output
    output_path = Path(output_path)
    vectors_path = output_path.with_name(output_path.name + ".vectors.f32")
    checkpoint = StreamCheckpoint(output_path, {"step": "diversify", "input": str(input_path), "field": text_field,
                                                "encoder": encoder.fingerprint, "config": asdict(config)},
                                  inputs=[input_path])
    progress = checkpoint.resume()
    state = progress.state or {"seen": 0, "kept": 0, "dropped": 0, "examples": []}
    dim = encoder.dim
    initial = None
    if progress.lines_done:
        raw = np.fromfile(vectors_path, dtype=np.float32, count=state["kept"] * dim)
        if raw.size != state["kept"] * dim:
            raise CareError(f"{vectors_path} is shorter than its progress file says; delete the .partial, "
                            ".progress.json and .vectors.f32 files to start over")
        initial = raw.reshape(-1, dim)
    with open(vectors_path, "r+b" if progress.lines_done else "wb") as fh:
        fh.truncate(state["kept"] * dim * FLOAT_BYTES)
    filt = DynamicIndexFilter(dim, replace(config, threshold=state.get("threshold", config.threshold)), initial,
                              seen=state["seen"])
    kept_texts: dict[int, str] = {}  # index position -> text, only for report examples of this run
    bar = tqdm(desc="diversify", unit="text", initial=state["seen"], disable=not show_progress)
    for chunk in _chunks(input_path, text_field, progress.lines_done, config.chunk_size):
        texts = [t for _, _, t in chunk]
        if config.role == "query":
            vecs = encoder.encode_queries(texts, instruction=config.instruction, batch_size=config.batch_size)
        else:
            vecs = encoder.encode_documents(texts, batch_size=config.batch_size)
        if vecs.shape[1] != dim:
            raise CareError(f"encoder {encoder.name} returned {vecs.shape[1]}-d vectors, expected {dim}")
        if "threshold" not in state:  # the first chunk of a fresh run: fit the threshold to the encoder
            try:
                state.update(_resolve_threshold(config, vecs, encoder.name))
            except CareError:
                bar.close()
                checkpoint.discard()
                vectors_path.unlink(missing_ok=True)
                raise
            filt.config = replace(config, threshold=state["threshold"])
        base = filt.size
        keep, nearest = filt.offer(vecs)
        position = base
        for (_, _, text), ok, (nb, sim) in zip(chunk, keep, nearest):
            if ok:
                kept_texts[position] = text
                position += 1
            elif len(state["examples"]) < MAX_EXAMPLES:
                state["examples"].append({"dropped": text, "similar_kept": kept_texts.get(nb), "similarity": round(sim, 4)})
        kept_rows = [row for (_, row, _), ok in zip(chunk, keep) if ok]
        with open(vectors_path, "ab") as fh:
            fh.write(np.ascontiguousarray(vecs[[i for i, ok in enumerate(keep) if ok]], dtype=np.float32).tobytes())
            fh.flush()
            os.fsync(fh.fileno())
        state["seen"] += len(chunk)
        state["kept"] += len(kept_rows)
        state["dropped"] += len(chunk) - len(kept_rows)
        checkpoint.append(kept_rows, lines_done=chunk[-1][0], state=state)
        bar.update(len(chunk))
    bar.close()
    if not state["seen"] and not progress.lines_done:
        raise DataFormatError(input_path, "no texts", hint=f'add {{"{text_field}": ...}} lines')
    checkpoint.finish()
    vectors_path.unlink(missing_ok=True)
    report = {**state, "kept_ratio": state["kept"] / max(state["seen"], 1), "encoder": encoder.name,
              "config": asdict(config)}
    if report_path is not None:
        write_json(report_path, report)
    logger.info("diversify: kept %d of %d texts", state["kept"], state["seen"])
    return report
