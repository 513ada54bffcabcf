"""The paper's Figure 1 shape: retrieval quality against query-side speed (queries/s, log scale).

Used by ``care demo`` (its ``quality_vs_qps.png``) and ``benchmarks/bench_speed.py``. Needs the
``plots`` extra (matplotlib).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

#: Resolution of the saved figure.
FIGURE_DPI = 150
FIGURE_SIZE = (7, 4.5)


@dataclass(frozen=True)
class QualityPoint:
    """One model: its quality score and its query-side throughput (queries/s)."""

    model: str
    score: float
    qps: float


def quality_speed_figure(
    points: Sequence[QualityPoint],
    png: str | Path,
    *,
    speed_lines: Mapping[str, float] | None = None,
    ylabel: str = "quality",
    xlabel: str = "queries/s on CPU (log)",
    title: str = "quality vs query-side speed (cf. the paper's Figure 1)",
) -> Path:
    """Scatter ``points`` (annotated by model) over a log q/s axis and save a PNG.

    Args:
        points: models to place (``qps`` must be > 0).
        png: output path (parent folders are created).
        speed_lines: optional ``{name: q/s}`` drawn as vertical dashed lines (red when the name starts
            with ``doc-``: a document tower run online; green otherwise).
        ylabel, xlabel, title: axis labels and title.
    Returns:
        The PNG path.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import ScalarFormatter

    png = Path(png)
    png.parent.mkdir(parents=True, exist_ok=True)
    lines = dict(speed_lines or {})
    fig, ax = plt.subplots(figsize=FIGURE_SIZE)
    for p in points:
        ax.scatter(p.qps, p.score, zorder=3)
        ax.annotate(p.model, (p.qps, p.score), fontsize=8, xytext=(4, 4), textcoords="offset points")
    for name, qps in lines.items():
        ax.axvline(qps, color="tab:red" if name.startswith("doc-") else "tab:green", linestyle="--", linewidth=0.8)
        ax.annotate(name, (qps, 0.98), xycoords=("data", "axes fraction"), rotation=90, fontsize=7, va="top", ha="right")
    xs = [p.qps for p in points] + list(lines.values())
    if xs:
        ax.set_xlim(min(xs) / 2, max(xs) * 2)
    ax.set_xscale("log")
    ax.xaxis.set_major_formatter(ScalarFormatter())
    ax.set_xlabel(xlabel, fontsize=8)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(png, dpi=FIGURE_DPI)
    plt.close(fig)
    return png
