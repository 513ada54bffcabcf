"""A Chinese character-level tokenizer trained with the ``tokenizers`` library, for tiny models.

Real checkpoints bring their own tokenizers (XLM-R sentencepiece for gte-multilingual-base, byte-level
BPE for Qwen3). The tiny models that let the whole recipe run on a laptop CPU need a small vocabulary
trained on the user's own texts; this module builds it:

* NFKC normalisation (full-width letters/digits/punctuation fold to their ASCII forms);
* every CJK character is its own token (the usual unit of Chinese BERTs);
* ASCII words seen in the texts stay whole; unseen ones are spelled with WordPiece pieces
  (``xyz`` -> ``x ##y ##z``), never ``[UNK]``;
* digits are split one per token, so numbers such as ``120/80`` share a tiny digit vocabulary.

Two kinds:

* ``"encoder"`` (BERT-style query tower): ``[PAD] [UNK] [CLS] [SEP] [MASK]``; a text becomes
  ``[CLS] ... [SEP]``; right padding. CLS pooling reads position 0.
* ``"decoder"`` (LLM document tower): ``<pad> <unk>`` and the EOS token ``<|endoftext|>`` (the token
  Qwen3-Embedding appends), which the post-processor APPENDS to every sequence so that last-token
  pooling reads the EOS state. Padding side is ``left`` (Qwen3-Embedding's convention); last-token
  pooling in sentence-transformers finds the last real token from the attention mask, so right padding
  gives the same vectors too.
"""

from __future__ import annotations

import logging
import string
from collections import Counter
from collections.abc import Iterable
from typing import Literal

from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors
from transformers import PreTrainedTokenizerFast

from care.errors import CareError

logger = logging.getLogger(__name__)

TokenizerKind = Literal["encoder", "decoder"]

#: CJK Unified Ideographs (+ extension A and compatibility ideographs) and CJK symbols/punctuation.
CJK_CHAR_PATTERN = r"[\u3000-\u303f\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff00-\uffef]"

ENCODER_SPECIAL_TOKENS: dict[str, str] = {
    "pad_token": "[PAD]",
    "unk_token": "[UNK]",
    "cls_token": "[CLS]",
    "sep_token": "[SEP]",
    "mask_token": "[MASK]",
}
DECODER_SPECIAL_TOKENS: dict[str, str] = {
    "pad_token": "<pad>",
    "unk_token": "<unk>",
    "eos_token": "<|endoftext|>",
}
PADDING_SIDE: dict[str, str] = {"encoder": "right", "decoder": "left"}
#: Always in the vocabulary, so unseen ASCII words (drug names, units, lab codes) split into letters
#: instead of collapsing to UNK.
ASCII_ALPHABET: tuple[str, ...] = tuple(string.ascii_letters + string.digits + string.punctuation)
#: WordPiece continuation prefix (BERT convention).
CONTINUING_SUBWORD_PREFIX = "##"
#: Default ``model_max_length`` recorded in the tokenizer; the model's own limit caps it at load time.
DEFAULT_MODEL_MAX_LENGTH = 512


def _pre_tokenizer() -> pre_tokenizers.PreTokenizer:
    return pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(CJK_CHAR_PATTERN), behavior="isolated"),
            pre_tokenizers.Whitespace(),
            pre_tokenizers.Punctuation(behavior="isolated"),
            pre_tokenizers.Digits(individual_digits=True),
        ]
    )


def _count_pieces(texts: Iterable[str]) -> Counter[str]:
    normalizer, pre_tokenizer = normalizers.NFKC(), _pre_tokenizer()
    counts: Counter[str] = Counter()
    for text in texts:
        if text:
            counts.update(piece for piece, _ in pre_tokenizer.pre_tokenize_str(normalizer.normalize_str(text)))
    return counts


def train_char_tokenizer(
    texts: Iterable[str],
    *,
    kind: TokenizerKind,
    min_frequency: int = 1,
    max_vocab: int | None = None,
    model_max_length: int = DEFAULT_MODEL_MAX_LENGTH,
) -> PreTrainedTokenizerFast:
    """Train a Chinese character-level WordPiece tokenizer on ``texts``.

    The vocabulary is counted directly (no merge learning): every pre-token — a CJK character, an
    ASCII word, a digit, a punctuation mark — seen at least ``min_frequency`` times, most frequent
    first, plus every printable ASCII character and its ``##`` continuation piece, so unseen ASCII
    words are spelled out instead of becoming UNK. Ids are assigned deterministically (specials,
    ASCII pieces, then by frequency and text), so the same texts always give the same tokenizer.

    Args:
        texts: training texts (any iterable; read once).
        kind: ``"encoder"`` (BERT specials, ``[CLS] x [SEP]``, right padding) or ``"decoder"``
            (pad + EOS appended to every sequence, left padding).
        min_frequency: minimum count for a pre-token to enter the vocabulary (rarer ones are UNK).
        max_vocab: cap on the vocabulary size (special tokens and ASCII pieces always included).
        model_max_length: recorded maximum sequence length.
    Returns:
        A ``transformers.PreTrainedTokenizerFast`` ready for ``save_pretrained``.
    Raises:
        CareError: unknown ``kind`` or a ``max_vocab`` too small to hold the special tokens.
    """
    if kind not in PADDING_SIDE:
        raise CareError(f"unknown tokenizer kind {kind!r}; use 'encoder' or 'decoder'")
    specials = ENCODER_SPECIAL_TOKENS if kind == "encoder" else DECODER_SPECIAL_TOKENS
    special_list = list(specials.values())
    if max_vocab is not None and max_vocab <= len(special_list):
        raise CareError(f"max_vocab={max_vocab} cannot hold the {len(special_list)} special tokens; use a larger value")

    ordered = list(special_list)
    ascii_pieces = list(ASCII_ALPHABET) + [CONTINUING_SUBWORD_PREFIX + c for c in string.ascii_letters + string.digits]
    ordered += [p for p in ascii_pieces if p not in ordered]
    seen = set(ordered)
    learned = [
        piece for piece, count in sorted(_count_pieces(texts).items(), key=lambda kv: (-kv[1], kv[0]))
        if count >= min_frequency and piece not in seen
    ]
    if max_vocab is not None:
        learned = learned[: max(0, max_vocab - len(ordered))]
    vocab = {token: index for index, token in enumerate(ordered + learned)}

    tok = Tokenizer(models.WordPiece(vocab=vocab, unk_token=specials["unk_token"],
                                     continuing_subword_prefix=CONTINUING_SUBWORD_PREFIX))
    tok.normalizer = normalizers.NFKC()
    tok.pre_tokenizer = _pre_tokenizer()
    tok.decoder = decoders.WordPiece(prefix=CONTINUING_SUBWORD_PREFIX)
    tok.add_special_tokens(special_list)

    if kind == "encoder":
        cls, sep = specials["cls_token"], specials["sep_token"]
        tok.post_processor = processors.TemplateProcessing(
            single=f"{cls}:0 $A:0 {sep}:0",
            pair=f"{cls}:0 $A:0 {sep}:0 $B:1 {sep}:1",
            special_tokens=[(cls, tok.token_to_id(cls)), (sep, tok.token_to_id(sep))],
        )
    else:
        eos = specials["eos_token"]
        tok.post_processor = processors.TemplateProcessing(
            single=f"$A:0 {eos}:0",
            pair=f"$A:0 {eos}:0 $B:1 {eos}:1",
            special_tokens=[(eos, tok.token_to_id(eos))],
        )
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        padding_side=PADDING_SIDE[kind],
        model_max_length=model_max_length,
        **specials,
    )
    logger.info("trained %s char tokenizer: %d tokens", kind, len(fast))
    return fast
