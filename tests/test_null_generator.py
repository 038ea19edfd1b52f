"""The null check's decision model (:func:`fairspark.mdfa.validation.null_generator_p`).

Its null decisions must depend on the features alone. A model that predicts the rows it
was fitted on memorises each row's own observed decision, which carries S; the
cross-fitted one (the default) gives row i a probability from a model that never saw
row i. Checked by flipping one row's decision at a time: the cross-fitted probability
of that row must not move at all, the in-sample one moves towards the new decision.
No Spark.
"""

from __future__ import annotations

import numpy as np
import pytest

from fairspark.mdfa.validation import null_generator_p


def _data(n: int = 500):
    rng = np.random.default_rng(3)
    x = rng.normal(size=(n, 3))
    y = np.where(rng.random(n) < 1 / (1 + np.exp(-x[:, 0])), 1, -1)
    return x, y


@pytest.mark.parametrize("row", [0, 137, 402])
def test_cross_fitted_probability_ignores_the_rows_own_decision(row):
    x, y = _data()
    flipped = y.copy()
    flipped[row] = -y[row]
    cf = null_generator_p(x=x, y=y)
    cf_flip = null_generator_p(x=x, y=flipped)
    assert cf_flip[row] == pytest.approx(cf[row], abs=1e-12)
    assert not np.allclose(cf_flip, cf)  # the other folds' models did see the flip
    ins = null_generator_p(x=x, y=y, generator="in-sample")
    ins_flip = null_generator_p(x=x, y=flipped, generator="in-sample")
    assert (ins_flip[row] - ins[row]) * flipped[row] > 0.005  # memorised


def test_unknown_generator_is_refused():
    x, y = _data(50)
    with pytest.raises(ValueError, match="in-sample or cross-fitted"):
        null_generator_p(x=x, y=y, generator="oob")
