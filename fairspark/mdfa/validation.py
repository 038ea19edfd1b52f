"""Pieces of the mdfa audit's validation studies (``studies/``) that the tests check.

- the COMPAS case study's table: ProPublica's row filter, the paper's features I-V and
  the audited decision (docs/mdfa_compas_study.md);
- the null check's decision generator: ``P(Y = +1 | x)`` without S, from which the
  null calibration redraws decisions that depend on the features alone
  (docs/mdfa_validation.md).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

__all__ = ["COMPAS_DECISION", "COMPAS_FEATURES", "COMPAS_KEEP", "load_compas",
           "null_generator_p", "propublica_filter"]

#: features I-V of the paper's Table 1 (II is categorical: F felony, M misdemeanour)
COMPAS_FEATURES = ["priors_count", "c_charge_degree", "age", "juv_fel_count",
                   "juv_misd_count"]
#: the violent score text; 'High' is the audited decision
COMPAS_DECISION = "v_score_text"
#: the columns the study keeps (no names or dates of birth)
COMPAS_KEEP = ["id", "sex", "race", *COMPAS_FEATURES, "age_cat", COMPAS_DECISION,
               "score_text", "two_year_recid"]


def propublica_filter(df: pd.DataFrame) -> pd.DataFrame:
    """ProPublica's row filter of the COMPAS two-year file (compas-analysis notebook).

    Parameters
    ----------
    df:
        The raw ``compas-scores-two-years`` records.

    Returns
    -------
    pandas.DataFrame
        The rows screened within 30 days of the arrest, with a known recidivism
        outcome, no ordinary traffic offence ('O') and a score. Rows with a missing
        ``days_b_screening_arrest`` fail the first condition (as in ProPublica's R
        ``filter``).
    """
    days = df["days_b_screening_arrest"]
    keep = ((days >= -30) & (days <= 30) & (df["is_recid"] != -1)
            & (df["c_charge_degree"] != "O") & (df["score_text"] != "N/A"))
    return df.loc[keep.fillna(False)]


def load_compas(*, path: str | Path, filtered: bool = True) -> pd.DataFrame:
    """The COMPAS case study's table.

    Parameters
    ----------
    path:
        The ``compas-scores-two-years`` CSV (compressed or not).
    filtered:
        Apply :func:`propublica_filter` (the default); ``False`` keeps every record,
        as the paper's Table 2 population columns do.

    Returns
    -------
    pandas.DataFrame
        The :data:`COMPAS_KEEP` columns, rows with a missing kept value dropped.
    """
    df = pd.read_csv(path)
    if filtered:
        df = propublica_filter(df)
    return df[COMPAS_KEEP].dropna().reset_index(drop=True)


def null_generator_p(*, x: np.ndarray, y: np.ndarray,
                     generator: str = "cross-fitted") -> np.ndarray:
    """``P(Y = +1 | x)`` of the null check's decisions, fitted without S.

    A random forest (200 trees, at least 20 rows per leaf, seed 0). A model that
    predicts the rows it was fitted on partly memorises each row's own observed
    decision, which carries S; the cross-fitted one gives row i a probability from a
    model that never saw row i.

    Parameters
    ----------
    x:
        Features ``(n, d)``.
    y:
        Observed decisions in {-1, +1}.
    generator:
        ``cross-fitted`` (default): each of 5 folds predicted by the forest fitted on
        the other 4; ``in-sample``: the forest fitted on all rows predicts them.

    Returns
    -------
    numpy.ndarray
        One probability per row.

    Raises
    ------
    ValueError
        For any other ``generator``.
    """
    from sklearn.ensemble import RandomForestClassifier

    rf = RandomForestClassifier(200, min_samples_leaf=20, random_state=0, n_jobs=1)
    if generator == "in-sample":
        return rf.fit(x, y > 0).predict_proba(x)[:, 1]
    if generator == "cross-fitted":
        from sklearn.model_selection import KFold, cross_val_predict

        return cross_val_predict(rf, x, y > 0, method="predict_proba",
                                 cv=KFold(5, shuffle=True, random_state=0))[:, 1]
    raise ValueError(f"null generator {generator!r}: expected in-sample or cross-fitted")
