"""Run a care :class:`~care.encoders.base.Encoder` inside ``mteb`` (2.x): :class:`MTEBEncoderAdapter`
implements mteb's ``EncoderProtocol``, routing ``PromptType.query`` to ``encode_queries`` (with the
task's instruction) and ``PromptType.document`` / no prompt type to ``encode_documents``."""

from __future__ import annotations

import re
from typing import Any

import numpy as np
from mteb.models.abs_encoder import AbsEncoder
from mteb.models.model_meta import ModelMeta, ScoringFunction
from mteb.types import PromptType

from care.encoders.base import Encoder
from care.errors import CareError

#: Revision string recorded in mteb's result files (mteb wants one; ours is the encoder fingerprint).
_REVISION_CHARS = 12


class MTEBEncoderAdapter(AbsEncoder):
    """Wrap a care encoder for ``mteb.evaluate``.

    Args:
        encoder: the care encoder.
        instructions: optional ``{task_name: instruction}`` overriding the instruction mteb's task
            metadata carries (``prompt``); ``None`` entries mean "no instruction".
        batch_size: fallback encoder batch size when mteb gives none.
    """

    def __init__(self, encoder: Encoder, *, instructions: dict[str, str | None] | None = None, batch_size: int = 32) -> None:
        if not isinstance(encoder, Encoder):
            raise CareError(f"MTEBEncoderAdapter needs a dense Encoder, got {type(encoder).__name__}")
        self.encoder = encoder
        self.instructions = dict(instructions or {})
        self.batch_size = batch_size
        self.model_prompts = None
        name = re.sub(r"[^\w.\-]+", "_", encoder.name) or "care-model"
        self.mteb_model_meta = ModelMeta.create_empty(overwrites={
            "name": f"care/{name}",
            "revision": encoder.fingerprint[:_REVISION_CHARS] or "local",
            "embed_dim": encoder.dim,
            "similarity_fn_name": ScoringFunction.COSINE,
            "framework": ["PyTorch"],
            "use_instructions": True,
        })

    def _instruction(self, task_metadata: Any) -> str | None:
        if task_metadata.name in self.instructions:
            return self.instructions[task_metadata.name]
        prompt = task_metadata.prompt
        if isinstance(prompt, dict):
            prompt = prompt.get(PromptType.query.value)
        return prompt or None

    def encode(
        self,
        inputs: Any,
        *,
        task_metadata: Any,
        hf_split: str,
        hf_subset: str,
        prompt_type: PromptType | None = None,
        **kwargs: Any,
    ) -> np.ndarray:
        """Encode every batch of ``inputs`` (a DataLoader of ``{"text": [...]}``) in the role given by ``prompt_type``."""
        texts = [text for batch in inputs for text in batch["text"]]
        batch_size = int(kwargs.get("batch_size") or self.batch_size)
        show_progress = bool(kwargs.get("show_progress_bar", False))
        if prompt_type == PromptType.query:
            return self.encoder.encode_queries(texts, instruction=self._instruction(task_metadata), batch_size=batch_size, show_progress=show_progress)
        return self.encoder.encode_documents(texts, batch_size=batch_size, show_progress=show_progress)
