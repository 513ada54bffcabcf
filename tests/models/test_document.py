import numpy as np
import pytest
import torch
from sentence_transformers import SentenceTransformer

from care.errors import CareError
from care.models.document import build_document_encoder, ensure_eos_appended, save_document_encoder
from care.models.lora import LoraSettings

TEXTS = ["头痛", "高血压患者应该吃什么药？", "胃痛反酸"]  # different lengths -> padding in every batch
SMALL_LORA = LoraSettings(r=4, alpha=8, dropout=0.0)


def eos_states(model, texts):
    """Reference: run each text ALONE (no padding) and take the final hidden state, which must be EOS."""
    transformer = model[0]
    tok = transformer.tokenizer
    rows = []
    for text in texts:
        enc = tok(text, return_tensors="pt")
        assert enc["input_ids"][0, -1].item() == tok.eos_token_id
        with torch.no_grad():
            rows.append(transformer.auto_model(**enc).last_hidden_state[0, -1])
    return torch.stack(rows)


@pytest.mark.parametrize("side", ["left", "right"])
def test_last_token_pooling_reads_eos_under_both_padding_sides(tiny_document_dir, side):
    model = build_document_encoder(tiny_document_dir, padding_side=side)
    assert model[0].tokenizer.padding_side == side
    batch = model[0].tokenizer(TEXTS, padding=True)
    assert any(0 in row for row in batch["attention_mask"])  # padding really happened
    got = model.encode(TEXTS, batch_size=len(TEXTS), convert_to_numpy=True)
    expected = torch.nn.functional.normalize(eos_states(model, TEXTS), dim=-1).numpy()
    np.testing.assert_allclose(got, expected, atol=1e-5)


def test_matryoshka_cut_keeps_first_dims_then_normalises(tiny_document_dir):
    model = build_document_encoder(tiny_document_dir, output_dim=16)
    got = model.encode(TEXTS, convert_to_numpy=True)
    full = eos_states(model, TEXTS)
    expected = torch.nn.functional.normalize(full[:, :16], dim=-1).numpy()
    np.testing.assert_allclose(got, expected, atol=1e-5)
    assert model.get_embedding_dimension() == 16
    assert not any(p.requires_grad for p in model[2].parameters())  # the cut never trains
    with pytest.raises(CareError, match="output_dim"):
        build_document_encoder(tiny_document_dir, output_dim=10_000)


def test_truncated_documents_still_end_in_eos(tiny_document_dir):
    model = build_document_encoder(tiny_document_dir, max_seq_length=4)
    tok = model[0].tokenizer
    features = model[0].preprocess(["糖尿病饮食注意事项少吃糖"])
    assert features["input_ids"].shape[1] == 4 and features["input_ids"][0, -1].item() == tok.eos_token_id


def test_eos_is_added_to_a_tokenizer_that_lacks_it(tiny_document_dir):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_document_dir)
    tok.add_eos_token = False
    assert tok("头痛")["input_ids"][-1] != tok.eos_token_id
    ensure_eos_appended(tok)
    assert tok("头痛")["input_ids"][-1] == tok.eos_token_id


def test_lora_trains_only_adapter_params(tiny_document_dir):
    model = build_document_encoder(tiny_document_dir, lora=SMALL_LORA, output_dim=16)
    trainable = [name for name, p in model.named_parameters() if p.requires_grad]
    assert trainable and all("lora_" in name for name in trainable)
    targets = {name.split(".lora_")[0].rsplit(".", 1)[-1] for name in trainable}
    assert targets == set(SMALL_LORA.target_modules)


def test_lora_adapter_save_load_and_merged_save_give_same_vectors(tiny_document_dir, tmp_path, perturb_lora):
    model = build_document_encoder(tiny_document_dir, lora=SMALL_LORA, output_dim=16)
    perturb_lora(model)
    base = build_document_encoder(tiny_document_dir, output_dim=16).encode(TEXTS)
    vectors = model.encode(TEXTS)
    assert np.abs(vectors - base).max() > 1e-3  # the adapter changes the output

    save_document_encoder(model, tmp_path / "adapter")
    assert (tmp_path / "adapter" / "adapter_config.json").is_file()
    np.testing.assert_allclose(SentenceTransformer(str(tmp_path / "adapter")).encode(TEXTS), vectors, atol=1e-6)

    save_document_encoder(model, tmp_path / "merged", merge_lora=True)
    assert not (tmp_path / "merged" / "adapter_config.json").exists()
    np.testing.assert_allclose(SentenceTransformer(str(tmp_path / "merged")).encode(TEXTS), vectors, atol=1e-5)
    np.testing.assert_allclose(model.encode(TEXTS), vectors, atol=1e-5)  # in-memory adapter restored


def test_building_from_an_adapter_folder_resumes_it(tiny_document_dir, tmp_path, perturb_lora):
    model = build_document_encoder(tiny_document_dir, lora=SMALL_LORA, output_dim=16)
    perturb_lora(model)
    save_document_encoder(model, tmp_path / "adapter")
    resumed = build_document_encoder(tmp_path / "adapter", output_dim=16)
    trainable = [name for name, p in resumed.named_parameters() if p.requires_grad]
    assert trainable and all("lora_" in name for name in trainable)
    np.testing.assert_allclose(resumed.encode(TEXTS), model.encode(TEXTS), atol=1e-6)
    with pytest.raises(CareError, match="already holds a LoRA adapter"):
        build_document_encoder(tmp_path / "adapter", lora=LoraSettings(r=8, alpha=16))


def test_bad_settings_are_rejected(tiny_document_dir):
    with pytest.raises(CareError, match="padding_side"):
        build_document_encoder(tiny_document_dir, padding_side="middle")
    with pytest.raises(CareError, match="target modules"):
        build_document_encoder(tiny_document_dir, lora=LoraSettings(target_modules=("nonexistent",)))
    with pytest.raises(CareError, match="positive"):
        LoraSettings(r=0)
