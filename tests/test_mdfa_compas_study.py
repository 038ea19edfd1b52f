"""The COMPAS study's table (:mod:`fairspark.mdfa.validation`): ProPublica's row filter,
features I-V and the decision column, against an independent pandas computation.

No Spark: the loader is plain pandas.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from conftest import COMPAS_CSV as CSV

from fairspark.mdfa import validation as study


def _expected_rows() -> pd.DataFrame:
    """ProPublica's filter written independently: row by row over the raw records."""
    raw = pd.read_csv(CSV)
    keep = []
    for r in raw.itertuples(index=False):
        days = r.days_b_screening_arrest
        ok = (not pd.isna(days) and -30 <= days <= 30 and r.is_recid != -1
              and r.c_charge_degree != "O" and r.score_text != "N/A")
        keep.append(ok)
    return raw[np.array(keep)]


def test_filter_row_count_matches_an_independent_computation():
    exp = _expected_rows()
    got = study.load_compas(path=CSV, filtered=True)
    # 6,172 rows is the count ProPublica's notebook and the data README give
    assert len(got) == len(exp) == 6172
    assert sorted(got["id"]) == sorted(exp["id"])
    assert len(study.load_compas(path=CSV, filtered=False)) == len(pd.read_csv(CSV)) == 7214


def test_features_and_decision():
    got = study.load_compas(path=CSV, filtered=True)
    assert study.COMPAS_FEATURES == ["priors_count", "c_charge_degree", "age", "juv_fel_count",
                              "juv_misd_count"]
    assert set(got["c_charge_degree"]) == {"F", "M"}  # 'O' removed by the filter
    assert not {"name", "first", "last", "dob"} & set(got.columns)
    exp = _expected_rows().set_index("id").loc[got["id"]]
    # the decision: violent score text 'High'; its share per race from the raw records
    high = (exp["v_score_text"] == "High").to_numpy()
    assert study.COMPAS_DECISION == "v_score_text"
    assert np.array_equal(got[study.COMPAS_DECISION].eq("High").to_numpy(), high)
    aa = (exp["race"] == "African-American").to_numpy()
    assert high[aa].mean() == pytest.approx(
        (got[got.race == "African-American"][study.COMPAS_DECISION] == "High").mean())
    for col in study.COMPAS_FEATURES:
        assert np.array_equal(got[col].to_numpy(), exp[col].to_numpy()), col


def test_unfiltered_table_is_the_papers():
    """The paper's Table 2 population columns (AA vs Other: priors 4.44 / 2.46, High
    0.14 / 0.05) are the raw file's, not the filtered one's."""
    raw = study.load_compas(path=CSV, filtered=False)
    filt = study.load_compas(path=CSV, filtered=True)
    aa = raw.race == "African-American"
    assert round(raw.priors_count[aa].mean(), 2) == 4.44
    assert round(raw.priors_count[~aa].mean(), 2) == 2.46
    assert round((raw[study.COMPAS_DECISION][aa] == "High").mean(), 2) == 0.14
    assert round((raw[study.COMPAS_DECISION][~aa] == "High").mean(), 2) == 0.05
    aa_f = filt.race == "African-American"
    assert round(filt.priors_count[aa_f].mean(), 2) != 4.44
