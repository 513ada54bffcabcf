"""On-disk formats (BEIR/MTEB-style retrieval folders, rerank and STS JSONL,
FlagEmbedding-style training JSONL), their loaders, validation and atomic writers."""

from care.data.errors import DataFormatError
from care.data.io import atomic_write, iter_jsonl, write_jsonl

__all__ = ["DataFormatError", "atomic_write", "iter_jsonl", "write_jsonl"]
