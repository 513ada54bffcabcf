"""HFEncoder on tiny random models: pooling by hand, EOS + last-token under both padding sides,
instructions and prefixes, reload stability, fingerprints, Router models, missing paths."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from care.encoders.base import Encoder
from care.encoders.hf import HFEncoder, HFEncoderConfig, ensure_eos_appended
from care.encoders.model_location import looks_like_path
from care.encoders.registry import load_model
from care.errors import CareError, DimensionMismatchError

TEXTS = ["头痛怎么办", "高血压吃什么药", "感冒", "糖尿病患者症状"]


def _unit(rows: torch.Tensor) -> np.ndarray:
    array = rows.detach().float().numpy()
    return array / np.linalg.norm(array, axis=1, keepdims=True)


def _hidden_states(folder, texts):
    from transformers import AutoModel, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModel.from_pretrained(folder).eval()
    batch = tokenizer(texts, padding=True, return_tensors="pt")
    with torch.no_grad():
        hidden = model(**batch).last_hidden_state
    return hidden, batch["attention_mask"]


def test_cls_and_mean_pooling_match_hidden_states_by_hand(tiny_bert):
    hidden, mask = _hidden_states(tiny_bert, TEXTS)
    cls = load_model(f"{tiny_bert}?pooling=cls")
    mean = load_model(f"{tiny_bert}?pooling=mean")
    assert isinstance(cls, Encoder) and cls.dim == hidden.shape[-1]

    by_hand_cls = _unit(hidden[:, 0])
    by_hand_mean = _unit((hidden * mask[..., None]).sum(1) / mask.sum(1, keepdim=True))
    np.testing.assert_allclose(cls.encode_documents(TEXTS), by_hand_cls, atol=1e-5)
    np.testing.assert_allclose(mean.encode_documents(TEXTS), by_hand_mean, atol=1e-5)
    assert not np.allclose(by_hand_cls, by_hand_mean, atol=1e-3)
    assert cls.fingerprint != mean.fingerprint


def test_vectors_are_normalised_float32_and_stable_after_reload(tiny_bert):
    first = load_model(f"{tiny_bert}?pooling=cls&batch_size=2")
    vectors = first.encode_queries(TEXTS, instruction="检索相关文档")
    assert vectors.shape == (len(TEXTS), first.dim) and vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-6)

    again = load_model(f"{tiny_bert}?pooling=cls")
    np.testing.assert_allclose(again.encode_queries(TEXTS, instruction="检索相关文档"), vectors, atol=1e-6)
    assert again.fingerprint == first.fingerprint  # batch size does not change vectors
    assert first.encode_documents([]).shape == (0, first.dim)


def test_fingerprint_changes_with_every_encoding_setting(tiny_bert):
    base = load_model(f"{tiny_bert}?pooling=cls").fingerprint
    for option in ("max_length=8", "query_prefix=query:+", "instruction_template=Q:{instruction}|{query}", "dim=16"):
        assert load_model(f"{tiny_bert}?pooling=cls&{option}").fingerprint != base, option


def test_instruction_template_and_prefixes(tiny_bert):
    plain = load_model(f"{tiny_bert}?pooling=cls")
    formatted = [f"Instruct: 检索\nQuery: {text}" for text in TEXTS]
    np.testing.assert_allclose(plain.encode_queries(TEXTS, instruction="检索"), plain.encode_documents(formatted), atol=1e-6)

    e5_style = load_model(f"{tiny_bert}?pooling=cls&query_prefix=query:+&document_prefix=passage:+")
    np.testing.assert_allclose(
        e5_style.encode_queries(TEXTS), plain.encode_documents([f"query: {t}" for t in TEXTS]), atol=1e-6
    )
    np.testing.assert_allclose(
        e5_style.encode_documents(TEXTS), plain.encode_documents([f"passage: {t}" for t in TEXTS]), atol=1e-6
    )
    with pytest.raises(CareError, match="instruction_template"):
        load_model(f"{tiny_bert}?instruction_template=no+placeholders")


def test_instructions_false_keeps_the_query_prefix_and_ignores_task_instructions(tiny_bert):
    """An e5 student (``query_prefix=query: ``, trained without instructions) is evaluated as e5 is."""
    student = load_model(f"{tiny_bert}?pooling=cls&query_prefix=query:+&instructions=false")
    plain = load_model(f"{tiny_bert}?pooling=cls")
    expected = plain.encode_documents([f"query: {t}" for t in TEXTS])
    np.testing.assert_allclose(student.encode_queries(TEXTS, instruction="检索"), expected, atol=1e-6)
    following = load_model(f"{tiny_bert}?pooling=cls&query_prefix=query:+")
    assert not np.allclose(following.encode_queries(TEXTS, instruction="检索"), expected, atol=1e-4)
    assert student.fingerprint != following.fingerprint


def test_matryoshka_dim_truncates_and_renormalises(tiny_bert):
    full = load_model(f"{tiny_bert}?pooling=cls").encode_documents(TEXTS)
    cut = load_model(f"{tiny_bert}?pooling=cls&dim=8")
    assert cut.dim == 8
    expected = full[:, :8] / np.linalg.norm(full[:, :8], axis=1, keepdims=True)
    np.testing.assert_allclose(cut.encode_documents(TEXTS), expected, atol=1e-6)
    with pytest.raises(CareError, match="larger than"):
        load_model(f"{tiny_bert}?dim=4096")


@pytest.mark.parametrize("side", ["left", "right"])
def test_last_token_pooling_reads_the_appended_eos_under_both_padding_sides(tiny_qwen3, side):
    from transformers import AutoModel, AutoTokenizer

    encoder = load_model(f"{tiny_qwen3}?padding_side={side}")  # decoder-only: lasttoken + EOS by default
    assert encoder._settings["pooling"] == "lasttoken" and encoder._settings["eos_added"]
    tokenizer = encoder.model[0].tokenizer
    assert tokenizer.padding_side == side
    batch = encoder.model.preprocess(TEXTS)
    eos = tokenizer.eos_token_id
    mask = batch["attention_mask"]
    last = mask.shape[1] - 1 - mask.flip(1).argmax(1)  # last attended position per row
    assert all(batch["input_ids"][i, last[i]] == eos for i in range(len(TEXTS)))
    if side == "left":
        assert (last == mask.shape[1] - 1).all()

    # By hand: each text alone (no padding at all), EOS appended, hidden state at the final position.
    raw_tokenizer = AutoTokenizer.from_pretrained(tiny_qwen3)
    model = AutoModel.from_pretrained(tiny_qwen3).eval()
    expected = []
    for text in TEXTS:
        ids = torch.tensor([raw_tokenizer(text)["input_ids"] + [eos]])
        with torch.no_grad():
            expected.append(model(input_ids=ids).last_hidden_state[0, -1])
    np.testing.assert_allclose(encoder.encode_documents(TEXTS), _unit(torch.stack(expected)), atol=1e-4)


def test_eos_survives_truncation(tiny_qwen3):
    encoder = load_model(f"{tiny_qwen3}?max_length=4")
    ids = encoder.model.preprocess(["糖尿病患者症状怎么办"])["input_ids"][0]
    assert len(ids) == 4 and ids[-1] == encoder.model[0].tokenizer.eos_token_id
    assert ensure_eos_appended(encoder.model[0].tokenizer) is False  # already appends: no double EOS


def test_missing_local_path_says_how_to_pass_a_folder(tmp_path):
    with pytest.raises(CareError, match="does not exist.*local folder"):
        load_model(str(tmp_path / "no-such-model"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(CareError, match="without modules.json or config.json"):
        load_model(str(tmp_path / "empty"))


def test_unreachable_hub_id_is_a_clear_error(monkeypatch):
    import huggingface_hub

    def offline(*args, **kwargs):
        raise OSError("network unreachable")

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", offline)
    with pytest.raises(CareError, match="could not be fetched from the Hugging Face Hub"):
        load_model("BAAI/bge-base-zh-v1.5")
    assert looks_like_path("./models/x") and looks_like_path("/abs/x") and looks_like_path("a/b/c")
    assert not looks_like_path("BAAI/bge-base-zh-v1.5") and not looks_like_path("bert-base-chinese")


def _router_folder(tmp_path, bert_folder, qwen_folder, name):
    """A CARE-shaped model: query route BERT+CLS, document route Qwen3+last-token (EOS in the tokenizer)."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.base.modules import Normalize
    from sentence_transformers.base.modules.router import Router
    from sentence_transformers.sentence_transformer.modules import Pooling, Transformer

    query_transformer = Transformer(str(bert_folder))
    document_transformer = Transformer(str(qwen_folder))
    ensure_eos_appended(document_transformer.tokenizer)
    router = Router.for_query_document(
        query_modules=[query_transformer, Pooling(query_transformer.get_embedding_dimension(), pooling_mode="cls")],
        document_modules=[document_transformer, Pooling(document_transformer.get_embedding_dimension(), pooling_mode="lasttoken")],
    )
    model = SentenceTransformer(modules=[router, Normalize()], device="cpu")
    model.save(str(tmp_path / name))
    return tmp_path / name


def test_router_folder_routes_queries_and_documents(tmp_path, tiny_bert, tiny_qwen3):
    folder = _router_folder(tmp_path, tiny_bert, tiny_qwen3, "care-like")
    encoder = load_model(str(folder))
    assert isinstance(encoder, HFEncoder) and encoder.dim == 32

    bert_cls = load_model(f"{tiny_bert}?pooling=cls")
    qwen_last = load_model(str(tiny_qwen3))
    np.testing.assert_allclose(encoder.encode_queries(TEXTS), bert_cls.encode_queries(TEXTS), atol=1e-5)
    np.testing.assert_allclose(encoder.encode_documents(TEXTS), qwen_last.encode_documents(TEXTS), atol=1e-4)
    assert not np.allclose(encoder.encode_queries(TEXTS), encoder.encode_documents(TEXTS), atol=1e-3)


def test_a_routed_folder_identifies_each_route_by_content(tmp_path, tiny_bert, tiny_qwen3):
    """A CARE folder saved with a new query tower but the same document tower reuses the cached document
    vectors (same document-role fingerprint wherever it lies); any other change is a miss."""
    import shutil

    from safetensors.torch import load_file, save_file

    from care.bench.encoding import encode_collection
    from care.encoders.cache import EmbeddingCache

    first = _router_folder(tmp_path, tiny_bert, tiny_qwen3, "stage-a")
    second = tmp_path / "stage-b"
    shutil.copytree(first, second)
    weights = second / "query_0_Transformer" / "model.safetensors"
    tensors = load_file(weights)
    save_file({k: v + 0.01 if v.is_floating_point() else v for k, v in tensors.items()}, weights)
    a, b = load_model(str(first)), load_model(str(second))
    assert a.role_fingerprint("document") == b.role_fingerprint("document")
    assert a.role_fingerprint("query") != b.role_fingerprint("query") and a.fingerprint != b.fingerprint
    assert load_model(f"{first}?document_prefix=passage: ").role_fingerprint("document") != a.role_fingerprint("document")
    plain = load_model(str(tiny_bert))
    assert plain.role_fingerprint("document") == plain.fingerprint  # not routed: the whole model

    cache = EmbeddingCache(tmp_path / "cache")
    ids = [str(i) for i in range(len(TEXTS))]
    args = {"instruction": None, "batch_size": 4, "show_progress": False, "desc": "docs"}
    stored = encode_collection(a, cache, role="document", ids=ids, texts=TEXTS, **args)
    calls = []
    original = b.encode_documents
    b.encode_documents = lambda *x, **k: calls.append(1) or original(*x, **k)
    np.testing.assert_allclose(encode_collection(b, cache, role="document", ids=ids, texts=TEXTS, **args), stored)
    assert not calls  # a cache hit: the second folder never encoded a document
    np.testing.assert_allclose(b.encode_documents(TEXTS), stored, atol=1e-5)  # and the hit is right


def test_one_route_loaded_alone_shares_that_roles_fingerprint_and_no_other(tmp_path, tiny_bert, tiny_qwen3):
    """``care index build`` loads only a CARE folder's document route; its document vectors are the whole
    model's, so the role fingerprint (the cache key ``care bench`` wrote them under) must agree. The route
    asked for the other role's vectors would encode with the wrong tower: it must not claim that role's key."""
    from care.encoders.sides import load_side

    folder = _router_folder(tmp_path, tiny_bert, tiny_qwen3, "care-like")
    whole = load_model(str(folder))
    document, query = load_side(str(folder), "document"), load_side(str(folder), "query")
    assert document.role_fingerprint("document") == whole.role_fingerprint("document")
    assert query.role_fingerprint("query") == whole.role_fingerprint("query")
    assert document.role_fingerprint("query") != whole.role_fingerprint("query")
    assert query.role_fingerprint("document") != whole.role_fingerprint("document")
    assert document.fingerprint != whole.fingerprint != query.fingerprint  # the loaded models differ
    np.testing.assert_allclose(document.encode_documents(TEXTS), whole.encode_documents(TEXTS), atol=1e-5)
    prefixed = load_side(f"{folder}?document_prefix=passage: ", "document")
    assert prefixed.role_fingerprint("document") != document.role_fingerprint("document")


def _plain_and_routed(tmp_path, tiny_bert, tiny_qwen3):
    """A plain sentence-transformers folder (BERT, mean pooling) and a CARE-shaped folder whose document
    route is the same loaded modules, saved after the plain model has encoded (as a recipe stage that
    froze the tower saves it)."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.base.modules import Normalize
    from sentence_transformers.base.modules.router import Router
    from sentence_transformers.sentence_transformer.modules import Pooling, Transformer

    tower = [Transformer(str(tiny_bert)), None, Normalize()]
    tower[1] = Pooling(tower[0].get_embedding_dimension(), pooling_mode="mean")
    plain = SentenceTransformer(modules=list(tower), device="cpu")
    plain.save(str(tmp_path / "plain"))
    plain.encode(TEXTS)
    query = Transformer(str(tiny_qwen3))
    router = Router.for_query_document(
        query_modules=[query, Pooling(query.get_embedding_dimension(), pooling_mode="lasttoken"), Normalize()],
        document_modules=tower,
    )
    SentenceTransformer(modules=[router], device="cpu").save(str(tmp_path / "routed"))
    return tmp_path / "plain", tmp_path / "routed"


def test_a_plain_folder_and_a_routed_copy_of_its_tower_share_document_vectors(tmp_path, tiny_bert, tiny_qwen3):
    """The frozen document tower a CARE stage saves inside its routed folder is identified by content
    like the plain folder it came from, so the corpus is encoded once for both; the copy's tokenizer
    config records the call state of a used tokenizer, which does not change a vector."""
    from care.bench.encoding import encode_collection
    from care.encoders.cache import EmbeddingCache

    plain_dir, routed_dir = _plain_and_routed(tmp_path, tiny_bert, tiny_qwen3)
    plain, routed = load_model(str(plain_dir)), load_model(str(routed_dir))
    assert plain.role_fingerprint("document") == routed.role_fingerprint("document")
    assert plain.role_fingerprint("query") != routed.role_fingerprint("query")
    assert plain.fingerprint != routed.fingerprint

    cache = EmbeddingCache(tmp_path / "cache")
    ids = [str(i) for i in range(len(TEXTS))]
    args = {"instruction": None, "batch_size": 4, "show_progress": False, "desc": "docs"}
    stored = encode_collection(plain, cache, role="document", ids=ids, texts=TEXTS, **args)
    routed.encode_documents = lambda *x, **k: pytest.fail("a cache hit was expected")
    np.testing.assert_allclose(encode_collection(routed, cache, role="document", ids=ids, texts=TEXTS, **args), stored)
    np.testing.assert_allclose(load_model(str(routed_dir)).encode_documents(TEXTS), stored, atol=1e-5)


def test_what_changes_documents_changes_a_plain_folders_document_fingerprint(tmp_path, tiny_bert, tiny_qwen3):
    """A stored document prompt, a document prefix, a truncation side or other weights: each a miss.
    A query-only setting is not."""
    import json
    import shutil

    from safetensors.torch import load_file, save_file

    plain_dir, _ = _plain_and_routed(tmp_path, tiny_bert, tiny_qwen3)
    base = load_model(str(plain_dir)).role_fingerprint("document")
    assert load_model(f"{plain_dir}?query_prefix=query:+&instructions=false").role_fingerprint("document") == base
    assert load_model(f"{plain_dir}?document_prefix=passage:+").role_fingerprint("document") != base

    def variant(name, edit):
        folder = tmp_path / name
        shutil.copytree(plain_dir, folder)
        edit(folder)
        return load_model(str(folder)).role_fingerprint("document")

    def prompt(folder):
        path = folder / "config_sentence_transformers.json"
        config = json.loads(path.read_text(encoding="utf-8"))
        config["prompts"] = {**config.get("prompts", {}), "document": "文档："}
        path.write_text(json.dumps(config), encoding="utf-8")

    def left_truncation(folder):
        path = folder / "tokenizer_config.json"
        path.write_text(json.dumps({**json.loads(path.read_text(encoding="utf-8")), "truncation_side": "left"}),
                        encoding="utf-8")

    def weights(folder):
        tensors = load_file(folder / "model.safetensors")
        save_file({k: v + 0.01 if v.is_floating_point() else v for k, v in tensors.items()}, folder / "model.safetensors")

    for name, edit in (("prompt", prompt), ("left", left_truncation), ("weights", weights)):
        assert variant(name, edit) != base, name
    assert variant("copy", lambda folder: None) == base  # the same files elsewhere: a hit


@pytest.mark.parametrize("prompts, default", [
    ({"query": "q: "}, None),
    ({"query": "q: ", "passage": "p: ", "corpus": "c: "}, None),
    ({"corpus": "c: "}, None),
    ({"query": "q: ", "task": "t: "}, "task"),
    ({"document": "d: ", "task": "t: "}, "task"),
])
def test_document_prompt_is_the_prompt_sentence_transformers_puts_before_documents(tiny_bert, prompts, default):
    encoder = load_model(f"{tiny_bert}?pooling=mean")
    encoder.model.prompts, encoder.model.default_prompt_name = dict(prompts), default
    prompt = encoder.document_prompt()
    np.testing.assert_allclose(encoder.model.encode_document(TEXTS),
                               encoder.model.encode_document(TEXTS, prompt=prompt), atol=1e-6)
    assert not np.allclose(encoder.model.encode_document(TEXTS),
                           encoder.model.encode_document(TEXTS, prompt=prompt + "x"), atol=1e-4)


def test_router_with_different_route_widths_needs_a_declared_dim(tmp_path, tiny_bert, wide_qwen3):
    folder = _router_folder(tmp_path, tiny_bert, wide_qwen3, "wide-doc")
    with pytest.raises(DimensionMismatchError, match="32-d.*48-d"):
        load_model(str(folder))
    encoder = load_model(f"{folder}?dim=32")
    full = load_model(str(wide_qwen3)).encode_documents(TEXTS)
    expected = full[:, :32] / np.linalg.norm(full[:, :32], axis=1, keepdims=True)
    np.testing.assert_allclose(encoder.encode_documents(TEXTS), expected, atol=1e-4)


def test_config_round_trips_through_dict():
    config = HFEncoderConfig(model="/models/x", pooling="cls", max_length=256, dim=128, query_prefix="query: ")
    assert HFEncoderConfig.from_dict(config.to_dict()) == config
    assert HFEncoderConfig.from_dict({"model": "m", "max_length": "64", "append_eos": "true"}).max_length == 64
    with pytest.raises(CareError, match="pooling.*one of cls, mean, lasttoken"):
        HFEncoderConfig.from_dict({"model": "m", "pooling": "max"})
