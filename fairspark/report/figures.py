"""Matplotlib figures embedded as ``data:`` URIs (the report is one self-contained file)."""

from __future__ import annotations

import base64
import io

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

__all__ = ["figure_to_data_uri", "plt"]


def figure_to_data_uri(fig, *, dpi: int = 110) -> str:
    """Render a matplotlib figure to a PNG ``data:`` URI and close it."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, bbox_inches="tight")
    plt.close(fig)
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")
