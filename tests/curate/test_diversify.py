"""The dynamic vector-index filter: the paper's rule, chunking invariance, and crash + resume."""

from __future__ import annotations

import json

import numpy as np
import pytest

from care.curate.diversify import DiversifyConfig, DynamicIndexFilter, diversify_file
from care.curate.diversify_threshold import SimilarityProfile, calibrated_threshold
from care.errors import CareError


def _unit(*rows):
    m = np.array(rows, dtype=np.float32)
    return m / np.linalg.norm(m, axis=1, keepdims=True)


def test_drop_only_when_more_than_n_neighbours_exceed_threshold():
    config = DiversifyConfig(k=3, threshold=0.9, max_similar=1, seed_size=2)
    filt = DynamicIndexFilter(2, config)
    seeds = _unit([1, 0], [1, 0.01])  # near-identical seeds are kept: the seed is unfiltered
    assert filt.offer(seeds)[0] == [True, True]
    keep, nearest = filt.offer(_unit([1, 0.02], [0, 1], [0.01, 1], [0.02, 1]))
    # [1,.02] has two neighbours above 0.9 -> dropped; [0,1] none -> kept; [0.01,1] one (the kept [0,1]) -> kept;
    # [0.02,1] now two ([0,1] and [0.01,1], both kept in this same chunk) -> dropped
    assert keep == [False, True, True, False]
    assert nearest[0][0] in (0, 1) and nearest[0][1] > 0.99
    assert filt.size == 4


def test_chunk_size_does_not_change_the_result(tmp_path, char_encoder):
    rows = [{"id": str(i), "text": t} for i, t in enumerate(
        ["胃痛怎么办", "胃痛怎么办呢", "头痛发热", "头痛发热怎么办", "糖尿病饮食", "糖尿病的饮食", "高血压用药", "胃痛怎么办啊"] * 3)]
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    outs = []
    for chunk in (1, 3, 100):
        cfg = DiversifyConfig(k=3, threshold=0.9, max_similar=0, seed_size=1, chunk_size=chunk)
        report = diversify_file(src, tmp_path / f"out{chunk}.jsonl", char_encoder, cfg, show_progress=False)
        outs.append((tmp_path / f"out{chunk}.jsonl").read_text(encoding="utf-8"))
        assert report["kept"] + report["dropped"] == len(rows)
    assert outs[0] == outs[1] == outs[2]
    kept = [json.loads(line)["text"] for line in outs[0].splitlines()]
    assert len(kept) == len(set(kept)) < len(rows)  # exact repeats are always dropped
    assert report["examples"] and report["examples"][0]["similarity"] > 0.9


def _crash_at_chunk(chunk, src, out, encoder, cfg, monkeypatch):
    """Run diversify until it is killed while encoding its ``chunk``-th chunk; the encoder is restored after.
    Returns the real ``encode_documents``."""
    real, calls = encoder.encode_documents, {"n": 0}

    def crashing(batch, **kw):
        calls["n"] += 1
        if calls["n"] == chunk:
            raise KeyboardInterrupt("simulated crash")
        return real(batch, **kw)

    monkeypatch.setattr(encoder, "encode_documents", crashing)
    with pytest.raises(KeyboardInterrupt):
        diversify_file(src, out, encoder, cfg, show_progress=False)
    monkeypatch.setattr(encoder, "encode_documents", real)
    return real


def test_crash_then_resume_equals_uninterrupted(tmp_path, char_encoder, monkeypatch):
    texts = [f"{a}{b}" for a in ("胃痛", "头痛", "咳嗽", "腹泻", "失眠") for b in ("怎么办", "吃什么药", "怎么办呢", "挂什么科")]
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps({"id": i, "text": t}, ensure_ascii=False) + "\n" for i, t in enumerate(texts)),
                   encoding="utf-8")
    cfg = DiversifyConfig(k=3, threshold=0.85, max_similar=0, seed_size=2, chunk_size=4)
    diversify_file(src, tmp_path / "ref.jsonl", char_encoder, cfg, show_progress=False)

    out = tmp_path / "out.jsonl"
    real = _crash_at_chunk(3, src, out, char_encoder, cfg, monkeypatch)
    assert not out.exists() and (tmp_path / "out.jsonl.progress.json").exists()
    encoded: list[str] = []
    monkeypatch.setattr(char_encoder, "encode_documents", lambda b, **kw: (encoded.extend(b), real(b, **kw))[1])
    report = diversify_file(src, out, char_encoder, cfg, show_progress=False)
    assert out.read_text(encoding="utf-8") == (tmp_path / "ref.jsonl").read_text(encoding="utf-8")
    assert encoded == texts[8:]  # the two finished chunks were not encoded again
    assert report["seen"] == len(texts)
    with pytest.raises(CareError, match="different settings"):
        (tmp_path / "out2.jsonl.partial").write_text("", encoding="utf-8")
        (tmp_path / "out2.jsonl.progress.json").write_text(json.dumps({"settings": {}, "lines_done": 1, "bytes_done": 0}))
        diversify_file(src, tmp_path / "out2.jsonl", char_encoder, cfg, show_progress=False)


def test_paper_defaults_and_bad_settings():
    assert DiversifyConfig.for_role("query").threshold == 0.85
    assert DiversifyConfig.for_role("document").threshold == 0.78
    assert DiversifyConfig.for_role("query").k == 5 and DiversifyConfig.for_role("query").max_similar == 1
    with pytest.raises(CareError):
        DiversifyConfig(k=1, max_similar=1)
    with pytest.raises(CareError):
        DiversifyConfig.for_role("passage")


class AnisotropicEncoder:
    """Like e5: every vector shares a large common direction, so unrelated texts sit at cosine ~0.9."""

    name = "anisotropic-test"
    COMMON_WEIGHT = 3.0

    def __init__(self, base):
        self.base = base
        self.dim = base.dim
        rng = np.random.default_rng(0)
        common = rng.normal(size=self.dim)
        self.common = (common / np.linalg.norm(common)).astype(np.float32)

    @property
    def fingerprint(self) -> str:
        return "anisotropic-test-v1"

    def _encode(self, texts):
        vecs = self.base.encode_documents(texts) + self.COMMON_WEIGHT * self.common
        return vecs / np.linalg.norm(vecs, axis=1, keepdims=True)

    def encode_queries(self, texts, *, instruction=None, batch_size=32, show_progress=False):
        return self._encode(texts)

    def encode_documents(self, texts, *, batch_size=32, show_progress=False):
        return self._encode(texts)


DISTINCT = ["胃痛反酸烧心", "头晕眼花耳鸣", "失眠多梦易醒", "咳嗽有黄痰", "腰椎间盘突出", "皮肤瘙痒起疹子", "血糖偏高口渴",
            "膝盖关节肿胀", "月经推迟腹痛", "小儿发烧抽搐", "牙龈出血口臭", "视力模糊干涩", "便秘腹胀排气", "心慌胸闷气短",
            "尿频尿急尿痛", "脱发头皮油腻"]


def _write_texts(path, texts):
    path.write_text("".join(json.dumps({"id": i, "text": t}, ensure_ascii=False) + "\n" for i, t in enumerate(texts)),
                    encoding="utf-8")
    return path


def test_paper_threshold_is_refused_for_an_encoder_whose_random_pairs_exceed_it(tmp_path, char_encoder):
    src = _write_texts(tmp_path / "in.jsonl", DISTINCT)
    encoder = AnisotropicEncoder(char_encoder)
    config = DiversifyConfig.for_role("query")
    config.seed_size = 2
    out = tmp_path / "out.jsonl"
    with pytest.raises(CareError, match=r"threshold 0\.85 does not suit encoder anisotropic-test: \d+% of random pairs.*"
                                        r"p50 0\.9\d\d.*nearest neighbours.*--threshold auto \(calibrated for this encoder: 0\.9\d+\)"):
        diversify_file(src, out, encoder, config, show_progress=False)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.jsonl"]  # nothing half-made, so a rerun starts clean
    # what the check prevents: at 0.85 the filter keeps the seed and drops every distinct text after it
    config.calibration = "off"
    assert diversify_file(src, out, encoder, config, show_progress=False)["kept"] == 2


def test_auto_calibration_keeps_distinct_texts_and_drops_repeats(tmp_path, char_encoder):
    texts = DISTINCT + [DISTINCT[3], DISTINCT[7] + "。", DISTINCT[11]]
    src = _write_texts(tmp_path / "in.jsonl", texts)
    config = DiversifyConfig.for_role("query")
    config.seed_size, config.max_similar, config.calibration = 2, 0, "auto"
    report = diversify_file(src, tmp_path / "out.jsonl", AnisotropicEncoder(char_encoder), config, show_progress=False)
    assert report["threshold"] == calibrated_threshold(0.85, SimilarityProfile(**report["similarity_profile"]))
    assert report["threshold"] > 0.95 and report["similarity_profile"]["pairs_p50"] > 0.85
    kept = [json.loads(line)["text"] for line in (tmp_path / "out.jsonl").read_text(encoding="utf-8").splitlines()]
    assert kept == DISTINCT  # every distinct text kept, the repeats dropped


def test_paper_threshold_passes_the_check_for_a_spread_encoder(tmp_path, char_encoder):
    src = _write_texts(tmp_path / "in.jsonl", DISTINCT + [DISTINCT[0]])
    config = DiversifyConfig.for_role("query")
    config.seed_size, config.max_similar = 2, 0
    report = diversify_file(src, tmp_path / "out.jsonl", char_encoder, config, show_progress=False)
    assert report["threshold"] == 0.85 and report["kept"] == len(DISTINCT)


def test_calibrated_threshold_formula():
    profile = SimilarityProfile(texts=60, pairs_p50=0.8, pairs_p95=0.87, pairs_p99=0.9, nearest_p5=0.9,
                                nearest_p50=0.95, nearest_p95=0.98)
    assert calibrated_threshold(0.85, profile) == pytest.approx(0.97)
    isotropic = SimilarityProfile(60, -0.02, 0.2, 0.3, 0.4, 0.5, 0.7)
    assert calibrated_threshold(0.85, isotropic) == 0.85  # an encoder with spread-out cosines keeps the paper's value


@pytest.mark.parametrize("name", ["missing.jsonl", "folder"])
def test_an_input_that_is_no_file_leaves_no_checkpoint_files(tmp_path, char_encoder, name):
    """Diversify made .partial, .progress.json and .vectors.f32 beside the output before finding its input
    missing (or a folder), and 'resumed' them on the next try."""
    from care.data.errors import DataFormatError

    (tmp_path / "folder").mkdir()
    with pytest.raises(DataFormatError, match="file not found|is a folder"):
        diversify_file(tmp_path / name, tmp_path / "out" / "kept.jsonl", char_encoder, show_progress=False)
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_resume_after_the_input_was_edited_is_refused(tmp_path, char_encoder, monkeypatch):
    """Diversify resumed by line number, so rows edited between the crash and the resume were silently mixed."""
    src = tmp_path / "in.jsonl"
    texts = [f"{a}{b}" for a in ("胃痛", "头痛", "咳嗽") for b in ("怎么办", "吃什么药", "挂什么科")]
    src.write_text("".join(json.dumps({"text": t}, ensure_ascii=False) + "\n" for t in texts), encoding="utf-8")
    cfg = DiversifyConfig(k=3, threshold=0.85, max_similar=0, seed_size=2, chunk_size=3)
    out = tmp_path / "out.jsonl"
    _crash_at_chunk(2, src, out, char_encoder, cfg, monkeypatch)
    src.write_text(src.read_text(encoding="utf-8").replace("胃痛怎么办", "发热怎么办"), encoding="utf-8")
    with pytest.raises(CareError, match=r"in\.jsonl changed since the interrupted run.*start over"):
        diversify_file(src, out, char_encoder, cfg, show_progress=False)
    (tmp_path / "out.jsonl.partial").unlink()
    (tmp_path / "out.jsonl.progress.json").unlink()
    assert diversify_file(src, out, char_encoder, cfg, show_progress=False)["seen"] == len(texts)
