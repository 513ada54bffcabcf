import pytest

from care.errors import CareError
from care.models.tokenizer import train_char_tokenizer


@pytest.fixture(scope="module")
def encoder_tok(texts):
    return train_char_tokenizer(texts, kind="encoder")


@pytest.fixture(scope="module")
def decoder_tok(texts):
    return train_char_tokenizer(texts, kind="decoder")


def tokens(tok, text, **kwargs):
    return tok.convert_ids_to_tokens(tok(text, **kwargs)["input_ids"])


def test_encoder_splits_chinese_into_characters_with_cls_sep(encoder_tok):
    assert tokens(encoder_tok, "头痛怎么办") == ["[CLS]", "头", "痛", "怎", "么", "办", "[SEP]"]
    assert encoder_tok.padding_side == "right"
    assert encoder_tok.cls_token == "[CLS]" and encoder_tok.mask_token == "[MASK]" and encoder_tok.pad_token == "[PAD]"


def test_ascii_words_digits_and_full_width(encoder_tok):
    # seen word stays whole; digits one per token; unseen ASCII word spelled out, never UNK
    assert tokens(encoder_tok, "hypertension 120", add_special_tokens=False) == ["hypertension", "1", "2", "0"]
    assert tokens(encoder_tok, "xyz", add_special_tokens=False) == ["x", "##y", "##z"]
    # NFKC: full-width letters fold to ASCII
    assert tokens(encoder_tok, "ＣＴ", add_special_tokens=False) == tokens(encoder_tok, "CT", add_special_tokens=False)


def test_unseen_chinese_character_is_unk(encoder_tok):
    assert tokens(encoder_tok, "龘", add_special_tokens=False) == ["[UNK]"]


def test_decoder_appends_eos_and_pads_left(decoder_tok):
    assert tokens(decoder_tok, "头痛") == ["头", "痛", "<|endoftext|>"]
    batch = decoder_tok(["头痛", "高血压患者"], padding=True)
    assert decoder_tok.padding_side == "left"
    assert [row[-1] for row in batch["input_ids"]] == [decoder_tok.eos_token_id] * 2
    assert batch["attention_mask"][0][:2] == [0, 0]


def test_decoder_keeps_eos_when_truncating(decoder_tok):
    ids = decoder_tok("糖尿病饮食注意事项", truncation=True, max_length=4)["input_ids"]
    assert len(ids) == 4 and ids[-1] == decoder_tok.eos_token_id


def test_saved_tokenizer_reloads_identically(decoder_tok, tmp_path):
    from transformers import AutoTokenizer

    decoder_tok.save_pretrained(tmp_path)
    again = AutoTokenizer.from_pretrained(tmp_path)
    assert again("胃痛 xyz")["input_ids"] == decoder_tok("胃痛 xyz")["input_ids"]
    assert again.padding_side == "left"


def test_bad_arguments(texts):
    with pytest.raises(CareError, match="unknown tokenizer kind"):
        train_char_tokenizer(texts, kind="bpe")
    with pytest.raises(CareError, match="special tokens"):
        train_char_tokenizer(texts, kind="encoder", max_vocab=3)


def test_same_texts_give_the_same_ids(texts):
    a = train_char_tokenizer(texts, kind="encoder")
    b = train_char_tokenizer(list(reversed(texts)) * 2, kind="encoder")  # order and counts of ties differ
    assert a.get_vocab().keys() == b.get_vocab().keys()
    assert a("头痛 hypertension")["input_ids"] == train_char_tokenizer(texts, kind="encoder")("头痛 hypertension")["input_ids"]


def test_min_frequency_and_max_vocab(texts):
    rare = train_char_tokenizer(texts, kind="encoder", min_frequency=100)
    assert tokens(rare, "头", add_special_tokens=False) == ["[UNK]"]
    capped = train_char_tokenizer(texts, kind="encoder", max_vocab=200)
    assert len(capped) == 200
