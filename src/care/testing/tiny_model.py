"""A tiny CARE model and a small medical corpus, for tests and for trying the service in a minute.

``make_tiny_care_model(folder)`` builds a random-init CARE folder (tiny BERT query route + tiny
Qwen3 document route, Matryoshka-cut to the same width) in a few seconds on a CPU; its rankings are
meaningless, but every code path — index build, serve, ONNX export — runs exactly as with a trained
model::

    python -c "from care.testing.tiny_model import *; make_tiny_care_model('tiny'); write_corpus('corpus.jsonl')"
    care index build --model tiny/care --corpus corpus.jsonl --output idx
    care serve --index idx
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

#: A small corpus with a metadata field (``department``) for filter tests.
SAMPLE_DOCS: tuple[dict[str, Any], ...] = (
    {"id": "d1", "title": "偏头痛", "text": "偏头痛发作时可以服用布洛芬，注意休息，避免强光。", "department": "neurology"},
    {"id": "d2", "title": "高血压", "text": "高血压患者应低盐饮食，按时服用降压药，定期监测血压。", "department": "cardiology"},
    {"id": "d3", "title": "糖尿病", "text": "糖尿病患者要控制饮食，少吃甜食，规律运动，监测血糖。", "department": "endocrinology"},
    {"id": "d4", "title": "胃食管反流", "text": "胃痛、反酸、烧心可能是胃食管反流病，睡前不要进食。", "department": "gastroenterology"},
    {"id": "d5", "title": "肺结节", "text": "CT发现肺部小结节，多数是良性的，需要定期复查。", "department": "respiratory"},
    {"id": "d6", "title": "感冒", "text": "普通感冒多由病毒引起，多喝水，发热时可用退烧药。", "department": "respiratory"},
    {"id": "d7", "title": "冠心病", "text": "冠心病患者胸痛持续不缓解时应立即就医。", "department": "cardiology"},
    {"id": "d8", "title": "失眠", "text": "长期失眠可以尝试规律作息，必要时在医生指导下用药。", "department": "neurology"},
)
SAMPLE_QUERIES: tuple[str, ...] = ("头痛怎么办", "高血压吃什么药", "血糖高要注意什么", "反酸烧心", "肺部结节要复查吗")


def write_corpus(path: str | Path, docs: Sequence[dict[str, Any]] = SAMPLE_DOCS) -> Path:
    """Write ``docs`` as a corpus JSONL."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(d, ensure_ascii=False) + "\n" for d in docs), encoding="utf-8")
    return path


#: Weight scale of the untrained test query tower. At the tiny BERT's training init (0.02) an
#: untrained CLS vector hardly depends on the text (cosine > 0.9999 between texts), so a test could
#: not tell two inputs apart; 0.3 spreads them (mean pairwise cosine ~0.8).
UNTRAINED_QUERY_INIT_RANGE = 0.3


def make_tiny_care_model(folder: str | Path, texts: Sequence[str] | None = None, *, max_seq_length: int = 64) -> Path:
    """Build and save a random-init (untrained) tiny CARE model in ``folder/care``; returns that path."""
    import dataclasses

    from care.models import build_care_model, build_query_encoder, make_tiny_models, save_care_model
    from care.models.document import build_document_encoder
    from care.models.presets import TINY_BERT

    texts = list(texts) if texts else [d["title"] + d["text"] for d in SAMPLE_DOCS] + list(SAMPLE_QUERIES)
    shape = dataclasses.replace(TINY_BERT, initializer_range=UNTRAINED_QUERY_INIT_RANGE)
    query_dir, document_dir = make_tiny_models(texts, folder, query_shape=shape)
    query = build_query_encoder(query_dir, max_seq_length=max_seq_length)
    document = build_document_encoder(document_dir, output_dim=query.get_embedding_dimension(), max_seq_length=max_seq_length)
    return save_care_model(build_care_model(query, document), Path(folder) / "care")
