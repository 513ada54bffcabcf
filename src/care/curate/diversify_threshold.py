"""Fit a near-duplicate threshold to the encoder that measures similarity.

The paper's diversify thresholds (queries 0.85, documents 0.78) were set for the paper's encoder.
Encoders differ in how much of the cosine range unrelated texts already occupy: for
multilingual-e5, two random medical questions sit around 0.8, so at 0.85 most texts have
"near-duplicates" and the filter keeps little more than its seed. :func:`similarity_profile`
measures the encoder on the texts at hand (all pairs among the first texts, and each text's
nearest neighbour among them); :func:`calibrated_threshold` moves the paper's threshold into the
part of the range above what random pairs reach::

    t_calibrated = m + t * (1 - m),   m = max(0, median cosine of random pairs)

so an isotropic encoder (m ≈ 0) keeps the paper's value and e5 (m ≈ 0.8) gets ≈ 0.97.
:func:`check_threshold` refuses a threshold that more than :data:`MAX_RANDOM_PAIRS_ABOVE` of random
pairs exceed (it would measure the encoder, not duplication), printing the profile and the
calibrated value.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from care.errors import CareError

#: Texts of the first chunk used to profile the encoder (their pairs: ~130k cosines at 512).
PROFILE_TEXTS = 512
#: Fewer texts than this give too few pairs for a stable profile; the threshold is then used as given.
MIN_PROFILE_TEXTS = 8
#: A threshold that more than this share of random pairs exceed cannot tell near-duplicates from
#: unrelated texts (1 %: with the paper's k=5 neighbours, a text would then have a "similar"
#: neighbour by chance in ~5 % of lookups in an index of random texts).
MAX_RANDOM_PAIRS_ABOVE = 0.01
CALIBRATION_MODES = ("off", "check", "auto")
DIGITS = 4


@dataclass(frozen=True)
class SimilarityProfile:
    """Cosine similarities measured among ``texts`` texts: all pairs, and each text's nearest neighbour."""

    texts: int
    pairs_p50: float
    pairs_p95: float
    pairs_p99: float
    nearest_p5: float
    nearest_p50: float
    nearest_p95: float

    def describe(self) -> str:
        return (f"random pairs of the first {self.texts} texts: p50 {self.pairs_p50:.3f}, p95 {self.pairs_p95:.3f}, "
                f"p99 {self.pairs_p99:.3f}; nearest neighbours: p5 {self.nearest_p5:.3f}, "
                f"p50 {self.nearest_p50:.3f}, p95 {self.nearest_p95:.3f}")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _pair_similarities(vectors: np.ndarray) -> np.ndarray:
    sims = vectors @ vectors.T
    upper = np.triu_indices(len(vectors), k=1)
    return sims[upper]


def share_of_pairs_above(vectors: np.ndarray, threshold: float) -> float:
    """Share of the pairs among the first :data:`PROFILE_TEXTS` ``vectors`` whose cosine exceeds ``threshold``."""
    return float((_pair_similarities(np.asarray(vectors[:PROFILE_TEXTS], dtype=np.float32)) > threshold).mean())


def similarity_profile(vectors: np.ndarray) -> SimilarityProfile:
    """Profile unit-normalised ``vectors`` (the first :data:`PROFILE_TEXTS` rows are used)."""
    sample = np.ascontiguousarray(vectors[:PROFILE_TEXTS], dtype=np.float32)
    if len(sample) < 2:
        raise CareError("a similarity profile needs at least two texts")
    pairs = _pair_similarities(sample)
    sims = sample @ sample.T
    np.fill_diagonal(sims, -np.inf)
    nearest = sims.max(axis=1)

    def q(values: np.ndarray, pct: float) -> float:
        return round(float(np.percentile(values, pct)), DIGITS)

    return SimilarityProfile(len(sample), q(pairs, 50), q(pairs, 95), q(pairs, 99), q(nearest, 5), q(nearest, 50),
                             q(nearest, 95))


def calibrated_threshold(threshold: float, profile: SimilarityProfile) -> float:
    """The paper's ``threshold`` moved above the range random pairs occupy (module docstring)."""
    floor = max(0.0, profile.pairs_p50)
    return round(floor + threshold * (1.0 - floor), DIGITS)


def check_threshold(threshold: float, vectors: np.ndarray, profile: SimilarityProfile, *, encoder: str,
                    role: str) -> None:
    """Raise :class:`CareError` (with the profile and a suggested threshold) when more than
    :data:`MAX_RANDOM_PAIRS_ABOVE` of the random pairs among ``vectors`` exceed ``threshold``."""
    share = share_of_pairs_above(vectors, threshold)
    if share <= MAX_RANDOM_PAIRS_ABOVE:
        return
    suggested = calibrated_threshold(threshold, profile)
    raise CareError(
        f"diversify: the {role} threshold {threshold} does not suit encoder {encoder}: {share:.0%} of random "
        f"pairs are already above it ({profile.describe()}), so the filter would drop texts that are merely on the "
        f"same topic. Rerun with --threshold auto (calibrated for this encoder: {suggested}) or choose one with "
        f"--threshold (e.g. {suggested})"
    )
