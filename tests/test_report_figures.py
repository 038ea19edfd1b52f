"""Legends sit outside the plotted area in every report figure.

``figure_to_data_uri`` (which every audit's figure goes through) moves a legend that
covers an axes' plotted area, ticks or labels below the axes. The overlap is measured on
the drawn figure's boxes (matplotlib's window extents), independently of where the
legend was asked to go.
"""

from __future__ import annotations

import numpy as np

from fairspark.audits.figures import legend_overlaps, legends_outside, plt


def _crowded_hist():
    """A histogram whose bars fill the axes, with a ``loc="best"`` legend: no free
    corner, so matplotlib puts the legend over bars."""
    rng = np.random.default_rng(0)
    fig, ax = plt.subplots(figsize=(6, 2.6))
    for i, dash in enumerate(("-", "--")):
        ax.hist(rng.uniform(0, 1, 5000) + 0.01 * i, bins=20, histtype="step", ls=dash,
                label=f"a long label for series {i} (solid or dashed)")
    ax.axvline(0.5, label="the distance itself = 0.5")
    ax.set_ylim(0, 300)
    ax.legend(loc="best")
    ax.set_title("crowded")
    return fig


def _two_panels():
    """Two axes side by side (mdfa's layout), a legend in each over its data."""
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.4))
    x = np.linspace(0, 1, 50)
    for k, ax in enumerate(axes):
        for j in range(3):
            ax.plot(x, np.full_like(x, 0.2 + 0.3 * j), label=f"series {j}")
        ax.set_ylim(0, 1)
        ax.legend(loc="center")
        ax.set_title(f"panel {k}")
        ax.set_xlabel("t")
    return fig


def test_a_legend_over_the_data_is_found_and_moved_below():
    for make in (_crowded_hist, _two_panels):
        fig = make()
        before = legend_overlaps(fig)
        assert before, f"{make.__name__}: the case must start with a legend over data"
        legends_outside(fig)
        assert legend_overlaps(fig) == [], make.__name__
        # nothing was dropped: the same labels, every one of them
        for ax in fig.get_axes():
            assert ax.get_legend() is not None
            assert len(ax.get_legend().get_texts()) == len(ax.get_legend_handles_labels()[1])
        plt.close(fig)


def test_a_legend_already_outside_is_left_where_it_is():
    fig, ax = plt.subplots(figsize=(6, 3))
    ax.plot([0, 1], [0, 1], label="a line")
    ax.legend(loc="upper left", bbox_to_anchor=(1.05, 1.0))
    fig.canvas.draw()
    where = ax.get_legend().get_window_extent().bounds
    legends_outside(fig)
    assert ax.get_legend().get_window_extent().bounds == where
    plt.close(fig)


def test_a_long_group_name_is_wrapped_or_cut_never_replaced_by_its_role():
    from fairspark.group.report import _short_name

    assert _short_name("Amer-Indian-Eskimo") == "Amer-Indian-Eskimo"
    name = "Native Hawaiian or Other Pacific Islander (self-described)"
    label = _short_name(name)
    lines = label.split("\n")
    assert len(lines) == 2 and all(len(x) <= 22 for x in lines), label
    assert label.endswith("…") and "unprivileged" not in label
    # the label reads as the start of the name
    assert name.startswith(" ".join(lines).rstrip("…")), label
