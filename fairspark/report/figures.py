"""Matplotlib figures embedded as ``data:`` URIs (the report is one self-contained file)."""

from __future__ import annotations

import base64
import io

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

__all__ = ["MIN_FONT_PT", "figure_to_data_uri", "plt"]


#: the smallest font size (points) of any text in a report figure: a figure up to
#: 10.5 in wide, scaled into the 1000 px text column, keeps its text at 9 pt or more
MIN_FONT_PT = 10.0


def _legible(fig) -> None:
    """Raise every text of ``fig`` to :data:`MIN_FONT_PT` (ticks, legends, titles)."""
    from matplotlib.text import Text

    for ax in fig.get_axes():  # tick labels are made at draw time from these settings
        for axis in ("x", "y"):
            ticks = getattr(ax, f"{axis}axis").get_major_ticks()
            if ticks and ticks[0].label1.get_fontsize() < MIN_FONT_PT:
                ax.tick_params(axis=axis, which="both", labelsize=MIN_FONT_PT)
    for t in fig.findobj(Text):
        if t.get_text() and t.get_fontsize() < MIN_FONT_PT:
            t.set_fontsize(MIN_FONT_PT)


def figure_to_data_uri(fig, *, dpi: int = 110) -> str:
    """Render a matplotlib figure to a PNG ``data:`` URI and close it.

    Every text is raised to at least :data:`MIN_FONT_PT` points first, whichever
    audit drew the figure, so figure text stays legible at 100% zoom.
    """
    _legible(fig)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, bbox_inches="tight")
    plt.close(fig)
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")
