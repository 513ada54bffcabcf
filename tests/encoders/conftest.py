"""Tiny random-init models (BERT encoder, Qwen3 decoder) with a hand-built character tokenizer.

Built once per test session in a temporary folder; each loads in well under a second.
"""

from __future__ import annotations

from pathlib import Path

import pytest

#: Every character the tests use; anything else maps to the unknown token.
CHARS = (
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 :.,?!\n"
    "头痛发热咳嗽感冒高血压糖尿病怎么办治疗药物医生患者症状吃什么检索相关文档查询指令胃炎肚子疼"
)
HIDDEN = 32
WIDE_HIDDEN = 48
MAX_POSITIONS = 128
SEED = 0


def char_tokenizer(specials: list[str], *, unk: str, template: tuple[str, list[str]] | None = None, **special_kwargs):
    """A fast tokenizer with one token per character (whitespace dropped), wrapped for transformers."""
    from tokenizers import Regex, Tokenizer, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    vocab = {token: i for i, token in enumerate(specials)}
    for char in CHARS:
        vocab.setdefault(char, len(vocab))
    backend = Tokenizer(models.WordLevel(vocab, unk_token=unk))
    backend.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Split(Regex("."), behavior="isolated")]
    )
    if template is not None:
        single, tokens = template
        backend.post_processor = processors.TemplateProcessing(
            single=single, special_tokens=[(token, vocab[token]) for token in tokens]
        )
    return PreTrainedTokenizerFast(tokenizer_object=backend, unk_token=unk, model_max_length=MAX_POSITIONS, **special_kwargs)


def build_tiny_bert(folder: Path, hidden: int = HIDDEN) -> Path:
    """Random 2-layer BERT + [CLS] … [SEP] char tokenizer saved to ``folder``."""
    import torch
    from transformers import BertConfig, BertModel

    tokenizer = char_tokenizer(
        ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"],
        unk="[UNK]",
        template=("[CLS] $A [SEP]", ["[CLS]", "[SEP]"]),
        pad_token="[PAD]",
        cls_token="[CLS]",
        sep_token="[SEP]",
        mask_token="[MASK]",
    )
    torch.manual_seed(SEED)
    config = BertConfig(
        vocab_size=len(tokenizer), hidden_size=hidden, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=2 * hidden, max_position_embeddings=MAX_POSITIONS,
    )
    BertModel(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def build_tiny_qwen3(folder: Path, hidden: int = HIDDEN) -> Path:
    """Random 2-layer Qwen3 + char tokenizer (eos = pad = <|endoftext|>, no EOS appended) saved to ``folder``."""
    import torch
    from transformers import Qwen3Config, Qwen3Model

    tokenizer = char_tokenizer(["<|endoftext|>", "<unk>"], unk="<unk>", eos_token="<|endoftext|>", pad_token="<|endoftext|>")
    torch.manual_seed(SEED)
    config = Qwen3Config(
        vocab_size=len(tokenizer), hidden_size=hidden, num_hidden_layers=2, num_attention_heads=2,
        num_key_value_heads=1, head_dim=16, intermediate_size=2 * hidden, max_position_embeddings=MAX_POSITIONS,
    )
    Qwen3Model(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


@pytest.fixture(scope="session")
def tiny_bert(tmp_path_factory) -> Path:
    return build_tiny_bert(tmp_path_factory.mktemp("tiny-bert"))


@pytest.fixture(scope="session")
def tiny_qwen3(tmp_path_factory) -> Path:
    return build_tiny_qwen3(tmp_path_factory.mktemp("tiny-qwen3"))


@pytest.fixture(scope="session")
def wide_qwen3(tmp_path_factory) -> Path:
    return build_tiny_qwen3(tmp_path_factory.mktemp("wide-qwen3"), hidden=WIDE_HIDDEN)
