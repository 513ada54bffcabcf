"""Run options shared by every task runner."""

from __future__ import annotations

from dataclasses import dataclass, field

from care.encoders.cache import EmbeddingCache
from care.errors import CareError
from care.index.config import IndexConfig

DEFAULT_BATCH_SIZE = 32
#: Depth of the retrieved list per query (recall@100 needs 100).
DEFAULT_TOP_K = 100
#: Rows of document embeddings moved from the cache memmap into the index at a time.
ADD_BATCH_ROWS = 16_384
#: Queries searched per FAISS call.
SEARCH_BATCH_ROWS = 1_024


@dataclass
class RunOptions:
    """How to run a task.

    Attributes:
        cache: where embeddings are cached; ``None`` encodes into a temporary cache per run.
        index: FAISS index configuration for retrieval tasks.
        batch_size: encoder batch size.
        top_k: retrieved documents per query.
        show_progress: tqdm bars while encoding.
    """

    cache: EmbeddingCache | None = None
    index: IndexConfig = field(default_factory=IndexConfig)
    batch_size: int = DEFAULT_BATCH_SIZE
    top_k: int = DEFAULT_TOP_K
    show_progress: bool = True
    add_batch_rows: int = ADD_BATCH_ROWS
    search_batch_rows: int = SEARCH_BATCH_ROWS

    def __post_init__(self) -> None:
        # --top-k 0 scored every model 0.0000 without a word; --batch-size 0 failed deep in the encoder
        for flag, value in (("--top-k", self.top_k), ("--batch-size", self.batch_size)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise CareError(f"{flag} must be a whole number of at least 1, got {value!r}"
                                + (f" (the default is {DEFAULT_TOP_K}; Recall@100 needs 100)" if flag == "--top-k" else ""))
