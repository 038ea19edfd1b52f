"""Matplotlib figures embedded as ``data:`` URIs (the report is one self-contained file)."""

from __future__ import annotations

import base64
import io

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

__all__ = ["MIN_FONT_PT", "figure_to_data_uri", "legend_overlaps", "legends_outside", "plt"]


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


def _axes_area(ax, renderer):
    """The display box of ``ax`` with its ticks, labels and title, legend left out."""
    leg = ax.get_legend()
    visible = leg.get_visible() if leg is not None else None
    if leg is not None:
        leg.set_visible(False)
    try:
        return ax.get_tightbbox(renderer)
    finally:
        if leg is not None:
            leg.set_visible(visible)


def legend_overlaps(fig) -> list[str]:
    """Each legend of ``fig`` that covers a plotted area or an axes' labels.

    Returns
    -------
    list of str
        One line per overlap (the legend's axes title and what it covers); empty when
        every legend sits outside every axes' plotted area, ticks and labels.
    """
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    out = []
    for ax in fig.get_axes():
        leg = ax.get_legend()
        if leg is None or not leg.get_visible():
            continue
        box = leg.get_window_extent(renderer)
        for other in fig.get_axes():
            area = _axes_area(other, renderer)
            if box.overlaps(area):
                out.append(f"legend of {ax.get_title()!r} covers axes {other.get_title()!r}")
    return out


def legends_outside(fig) -> None:
    """Move every legend that covers a plotted area below its axes' labels.

    A legend drawn with ``loc="best"`` still sits on the data when the data fill the
    axes; the report's figures keep their legends outside the plotted area, below the
    axes' ticks and x label, in as many columns as fit the axes' width. The saved
    figure (``bbox_inches="tight"``) grows to hold it.
    """
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    inv = fig.transFigure.inverted()
    for ax in fig.get_axes():
        leg = ax.get_legend()
        if leg is None or not legend_overlaps_axes(fig, leg, renderer):
            continue
        handles, labels = leg.legend_handles, [t.get_text() for t in leg.get_texts()]
        size = leg.get_texts()[0].get_fontsize() if leg.get_texts() else MIN_FONT_PT
        leg.remove()
        area = inv.transform_bbox(ax.get_tightbbox(renderer))
        ncol = 1 if max(map(len, labels), default=0) > 28 else min(len(labels), 2)
        ax.legend(handles=handles, labels=labels, loc="upper left", fontsize=size, frameon=False,
                  ncol=ncol, bbox_to_anchor=(area.x0, area.y0 - 0.01),
                  bbox_transform=fig.transFigure)


def legend_overlaps_axes(fig, leg, renderer) -> bool:
    """Whether legend ``leg`` covers any axes (plotted area, ticks or labels) of ``fig``."""
    box = leg.get_window_extent(renderer)
    return any(box.overlaps(_axes_area(ax, renderer)) for ax in fig.get_axes())


def figure_to_data_uri(fig, *, dpi: int = 110) -> str:
    """Render a matplotlib figure to a PNG ``data:`` URI and close it.

    Every text is raised to at least :data:`MIN_FONT_PT` points first, whichever
    audit drew the figure, so figure text stays legible at 100% zoom, and every legend
    that covers a plotted area is moved below it (:func:`legends_outside`).
    """
    _legible(fig)
    legends_outside(fig)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, bbox_inches="tight")
    plt.close(fig)
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")
