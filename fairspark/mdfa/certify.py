"""Driver-side kernels of mdfa: the view's preparation, the balancing of a split, one split.

Everything here is plain numpy / scikit-learn / torch; the Spark tasks of
:mod:`fairspark.mdfa._spark` call :func:`run_split` unchanged. The concept classes of
the certificate are in :mod:`~.auditors`, Algorithm 1 and its rules in
:mod:`~.violation` (their names are re-exported here).
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Callable, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from fairspark._values import nan_to_none
from fairspark.mdfa.auditors import certificate_gamma, fit_certificate, make_auditor
from fairspark.mdfa.balance import balanced_weights, fit_balancing
from fairspark.mdfa.diagnostics import BalanceDiagnostics, balance_diagnostics
from fairspark.mdfa.null import draws_of_split, fit_null_model, null_outcome
from fairspark.mdfa.params import MDFAParams
from fairspark.mdfa.results import SplitResult
from fairspark.mdfa.violation import (
    SplitPart,
    WorstViolation,
    group_description,
    readable_rules,
    rules_of,
    violation_delta,
    worst_violation,
)
from fairspark.sampling import derive_seed

__all__ = [
    "MDFASample",
    "SplitPart",
    "SplitState",
    "ViewBalance",
    "WorstViolation",
    "balance_split",
    "certificate_gamma",
    "choose_l2",
    "fit_certificate",
    "make_auditor",
    "prepare_view",
    "readable_rules",
    "run_split",
    "violation_delta",
    "worst_violation",
]


@dataclass
class ViewBalance:
    """The view's balancing nets, applied once to every row of the sample.

    Split ``i`` uses net ``i mod B`` (``B = len(u)``): net ``b`` is the one split ``b``
    would train on its own (its training rows and seed), so the first ``B`` splits are
    the same as with per-split nets.

    Attributes
    ----------
    u:
        ``(B, n)``: raw weights ``u(x)`` of every row under each net
        (:meth:`.balance.BalancingResult.u`).
    z:
        ``(B, n, 8)``: each net's representation of every row, the certificate's
        features (None: the certificate reads the standardised features).
    l2:
        The L2 strength of the nets.
    mmd:
        Each net's held-out MMD.
    """

    u: np.ndarray
    z: np.ndarray | None
    l2: float | None
    mmd: list[float | None]

    def pick(self, split: int) -> tuple[np.ndarray, np.ndarray | None, float | None]:
        """Raw weights, representation and held-out MMD of the net of split ``split``."""
        b = int(split) % len(self.u)
        return self.u[b], None if self.z is None else self.z[b], self.mmd[b]


@dataclass
class MDFASample:
    """The collected audit sample of one attribute (small: capped by ``sample_rows``).

    Attributes
    ----------
    x:
        Audit features ``(n, d)`` as numbers (numeric columns, one-hot categories).
    s:
        Sensitive view in {-1, +1} (+1 = the target group).
    y:
        Outcome in {-1, +1} (+1 = favourable decision).
    desc:
        Description columns ``(n, k)`` in original units (redacted columns left out).
    feature_names, desc_names:
        Column names of ``x`` and ``desc``.
    p_null:
        Cross-fitted ``P(Y = +1 | x)`` without S (:func:`~.null.fit_null_model`), or
        None: no null reference (see :meth:`with_null_model`).
    null_seed:
        Seed of the null draws (``ctx.seed_for("mdfa", attribute, "null")``).
    view_balance:
        The view's one balancing net applied to every row (:func:`prepare_view`), or
        None: every split trains its own net.
    """

    x: np.ndarray
    s: np.ndarray
    y: np.ndarray
    desc: np.ndarray
    feature_names: list[str]
    desc_names: list[str] = field(default_factory=list)
    p_null: np.ndarray | None = None
    null_seed: int = 0
    view_balance: ViewBalance | None = None

    def with_null_model(self, *, seed: int, library: str = "lightgbm") -> MDFASample:
        """This sample with its null model fitted (seeded by ``seed``, grown by
        ``library``: :func:`~.null.fit_null_model`), for the verdict."""
        p = fit_null_model(self.x, self.y, seed=derive_seed(seed, "model"), library=library)
        return dataclasses.replace(self, p_null=p, null_seed=int(seed))


@dataclass
class SplitState:
    """One split after balancing: row indices, certificate features and weights."""

    train: SplitPart
    test: SplitPart
    tr: np.ndarray
    te: np.ndarray
    l2: float | None
    mmd: float | None
    balance: BalanceDiagnostics


def _split_rows(
    sample: MDFASample, *, seed: int, params: MDFAParams
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The split's training and held-out row indices and x standardised on the
    training part (float32)."""
    x = sample.x
    rng = np.random.default_rng(derive_seed(seed, "split"))
    perm = rng.permutation(len(x))
    n_te = round(params.test_fraction * len(x))
    te, tr = np.sort(perm[:n_te]), np.sort(perm[n_te:])
    mean = x[tr].mean(0)
    sd = x[tr].std(0)
    sd[sd == 0] = 1.0
    return tr, te, ((x - mean) / sd).astype(np.float32)


def _balance(xs: np.ndarray, s: np.ndarray, *, seed: int, params: MDFAParams):
    """The balancing net of a split's training rows (``params.l2`` or the grid)."""
    return fit_balancing(xs, s, seed=derive_seed(seed, "balance"), l2=params.l2,
                         options=params.balancing_options())


def choose_l2(sample: MDFASample, *, seed: int, params: MDFAParams) -> MDFAParams:
    """``params`` with the L2 strength of the balancing net fixed for every split.

    With ``l2_selection: once`` (default), balancing ``mmd_net``, no fixed ``l2`` and
    more than one value in ``l2_grid``, the grid is searched on the folds of the split
    whose seed is ``seed`` (the view's first split) exactly as :func:`balance_split`
    would search it there, and the strength kept is returned in ``l2``: that split's
    net is then the grid search's, and every other split trains one net instead of
    ``len(l2_grid)``, which divides the balancing cost by the grid's size. Otherwise
    ``params`` is returned unchanged (with a one-value grid that value is used, the same
    net either way).

    Parameters
    ----------
    sample:
        The view's collected sample.
    seed:
        Seed of the view's first split.
    params:
        The audit parameters.
    """
    if (params.balancing != "mmd_net" or params.l2 is not None
            or params.l2_selection != "once" or len(params.l2_grid) < 2):
        return params
    import torch  # noqa: F401 - loaded so that single_thread pins its pool too

    from fairspark._threads import single_thread

    with single_thread():  # as in a task: one thread, the same floats
        tr, _, xs = _split_rows(sample, seed=seed, params=params)
        bal = _balance(xs[tr], sample.s.astype(int)[tr], seed=seed, params=params)
    return params.model_copy(update={"l2": bal.l2})


def prepare_view(
    sample: MDFASample, *, seeds: Sequence[int], params: MDFAParams,
    pool: Executor | None = None, check: Callable[[], None] | None = None,
) -> tuple[MDFASample, MDFAParams]:
    """The work done once per view before its splits: the balancing nets of the view.

    With ``balancing_nets: view`` (default) and ``balancing: mmd_net``, the nets of the
    view's first ``view_nets`` splits (seeds ``seeds[:view_nets]``; the L2 grid
    searched on the first one's folds unless ``l2`` is fixed) are trained once on the
    driver, and their weights and representations of every row go with the sample, so
    that no split trains a net: split ``i`` uses net ``i mod view_nets`` on its own
    train/test cut (:class:`ViewBalance`). The weights depend on (x, s) only, so the
    null draws share them as before. With ``balancing_nets: split`` this is
    :func:`choose_l2` (one net per split).

    Parameters
    ----------
    sample:
        The view's collected sample.
    seeds:
        Seeds of the view's splits, in order (at least the first).
    params:
        The audit parameters.
    pool:
        Train the first net's L2 grid, and then the other nets, in this executor's
        threads; each net is trained single-threaded, so the nets are the serial
        run's to the bit. None: one after another.
    check:
        Called after the first net's L2 grid, before the other nets (the audit's time
        check: this work is on the driver, where no Spark job cancel reaches).

    Returns
    -------
    tuple of MDFASample and MDFAParams
        The sample (with :attr:`MDFASample.view_balance` set when view nets are used)
        and the parameters with ``l2`` set to the strength kept.
    """
    if params.balancing != "mmd_net" or params.balancing_nets == "split":
        return sample, choose_l2(sample, seed=seeds[0], params=params)
    import torch  # noqa: F401 - loaded so that single_thread pins its pool too

    from fairspark._threads import single_thread

    s = sample.s.astype(int)
    want_z = params.certificate_features == "representation"

    def one_net(seed: int, prm: MDFAParams, grid_pool: Executor | None = None):
        tr, _, xs = _split_rows(sample, seed=seed, params=prm)
        bal = fit_balancing(xs[tr], s[tr], seed=derive_seed(seed, "balance"), l2=prm.l2,
                            options=prm.balancing_options(), pool=grid_pool)
        z = bal.representation(xs).astype(np.float32) if want_z else None
        return bal.u(xs), z, bal.heldout_loss, bal.l2

    seeds = list(seeds)[:params.view_nets]
    with single_thread():  # as in a task: one thread per net, the same floats
        first = one_net(seeds[0], params, pool)  # the grid's, once
        params = params.model_copy(update={"l2": first[3]})
        if check is not None:
            check()
        rest = ([one_net(sd, params) for sd in seeds[1:]] if pool is None else
                [f.result() for f in [pool.submit(one_net, sd, params) for sd in seeds[1:]]])
    nets = [first, *rest]
    zs = [z for _, z, _, _ in nets if z is not None]
    view = ViewBalance(u=np.stack([u for u, _, _, _ in nets]),
                       z=np.stack(zs) if zs else None, l2=first[3],
                       mmd=[m for _, _, m, _ in nets])
    return dataclasses.replace(sample, view_balance=view), params


def balance_split(
    sample: MDFASample, *, seed: int, params: MDFAParams, split: int = 0
) -> SplitState:
    """Split the rows, standardise x on the training part, balance, pick the features z.

    Depends on ``sample.x``, ``sample.s``, ``seed``, ``params`` and, with view nets,
    ``split`` (which net, :class:`ViewBalance`) only (not on the decisions), so several
    outcome vectors on the same rows can share it (``run_split(..., state=...)``).
    """
    s, y = sample.s.astype(int), sample.y.astype(int)
    n = len(s)
    tr, te, xs = _split_rows(sample, seed=seed, params=params)
    u, l2, mmd, z = np.ones(n), None, None, xs.astype(float)
    view = sample.view_balance
    if params.balancing == "mmd_net" and view is not None:  # one of the view's nets
        u, rep, mmd = view.pick(split)
        l2, z = view.l2, (rep.astype(float) if rep is not None else z)
    elif params.balancing == "mmd_net":
        bal = _balance(xs[tr], s[tr], seed=seed, params=params)
        u, l2, mmd = bal.u(xs), bal.l2, bal.heldout_loss
        if params.certificate_features == "representation":
            z = bal.representation(xs)
    w_tr, w_te = balanced_weights(u[tr], s[tr]), balanced_weights(u[te], s[te])
    diag = balance_diagnostics(x_tr=xs[tr], s_tr=s[tr], w_tr=w_tr,
                               x_te=xs[te], s_te=s[te], w_te=w_te)
    return SplitState(
        train=SplitPart(z[tr], s[tr], y[tr], w_tr), test=SplitPart(z[te], s[te], y[te], w_te),
        tr=tr, te=te, l2=l2, mmd=mmd, balance=diag,
    )


def _certificate_gammas(st: SplitState, *, seed: int, params: MDFAParams) -> tuple[float, float]:
    """Held-out gamma(+1) and gamma(-1) of the certificates fitted on the training part."""
    tr, te, tilt = st.train, st.test, params.certificate_tilt

    def certificate(y_value: int) -> np.ndarray:
        target = y_value * tr.s * tr.y
        wt = tr.w * (1.0 + tilt * (target < 0)) if tilt > 0 else tr.w
        c = fit_certificate(
            params.auditor, tr.z, target, wt, seed=derive_seed(seed, "cert", y_value),
            forest=params.forest,
        )
        return c(te.z)

    c_pos = certificate(1)
    gamma_pos = certificate_gamma(c_pos, s=te.s, y=te.y, w=te.w, y_value=1)
    # without tilt the concept classes are symmetric: the certificate for y = -1
    # (target -S Y) is -c, so it is not fitted again
    c_neg = certificate(-1) if tilt > 0 else -c_pos
    gamma_neg = certificate_gamma(c_neg, s=te.s, y=te.y, w=te.w, y_value=-1)
    return gamma_pos, gamma_neg


def _outcome_gaps(st: SplitState, sample: MDFASample) -> dict[str, float]:
    """Held-out gap between S = +1 and S = -1 in the null model's P(Y = +1 | x),
    unweighted and weighted (empty: no null model)."""
    if sample.p_null is None:
        return {}
    q, w, s = sample.p_null[st.te], st.test.w, st.test.s
    pos, neg = s > 0, s < 0
    if not pos.any() or not neg.any():
        return {}
    return {
        "outcome_gap_before": float(q[pos].mean() - q[neg].mean()),
        "outcome_gap_after": float(np.average(q[pos], weights=w[pos])
                                   - np.average(q[neg], weights=w[neg])),
    }


def _null_gammas(
    st: SplitState, sample: MDFASample, *, split: int, seed: int, params: MDFAParams
) -> dict[str, Any]:
    """gamma(+1), gamma(-1) and their max for the split's null draws
    (:func:`~.null.draws_of_split`), with this split's weights and certificates fitted
    afresh for each (empty: no null model). The first draw fills ``null_draw`` and
    ``gamma_null_*``, the others ``null_more``."""
    k_used = params.null_k()
    if sample.p_null is None or k_used == 0:
        return {}
    found = []
    for r, k in enumerate(draws_of_split(split, k=k_used, per_split=params.null_per_split)):
        y0 = null_outcome(sample.p_null, seed=derive_seed(sample.null_seed, "draw", k))
        st0 = dataclasses.replace(
            st, train=dataclasses.replace(st.train, y=y0[st.tr]),
            test=dataclasses.replace(st.test, y=y0[st.te]),
        )
        cert_seed = derive_seed(seed, "null") if r == 0 else derive_seed(seed, "null", r)
        found.append((k, *_certificate_gammas(st0, seed=cert_seed, params=params)))
    k, g_pos, g_neg = found[0]
    return {"null_draw": k, "gamma_null_pos": g_pos, "gamma_null_neg": g_neg,
            "gamma_null_max": max(g_pos, g_neg),
            "null_more": json.dumps([[int(kk), nan_to_none(a), nan_to_none(b)]
                                     for kk, a, b in found[1:]])}


def _violation_outcome(params: MDFAParams, gamma_pos: float, gamma_neg: float) -> int:
    if params.violation_outcome == "favourable":
        return 1
    if params.violation_outcome == "unfavourable":
        return -1
    return 1 if gamma_pos >= gamma_neg else -1


def _with_violation(
    out: SplitResult, st: SplitState, sample: MDFASample, *, seed: int, params: MDFAParams
) -> SplitResult:
    """``out`` with Algorithm 1's worst violation, its description and rules."""
    y_value = _violation_outcome(params, out.gamma_pos, out.gamma_neg)
    tr, te = st.train, st.test
    wv = worst_violation(tr, te, y_value=y_value, params=params, seed=seed)
    g = wv.in_g_test
    du = violation_delta(g, s=te.s, y=te.y, w=None, y_value=y_value)
    desc = sample.desc[st.te]
    rules, fidelity = rules_of(desc, g, names=sample.desc_names, seed=seed,
                             depth=params.rule_depth)
    trace = [{k: nan_to_none(v) if isinstance(v, float) else v for k, v in d.items()}
             for d in wv.trace]
    return dataclasses.replace(
        out,
        y_wv=y_value,
        delta=nan_to_none(violation_delta(g, s=te.s, y=te.y, w=te.w, y_value=y_value)),
        delta_unweighted=nan_to_none(du),
        ratio_in_subgroup=math.exp(du) if np.isfinite(du) else nan_to_none(du),
        mass=wv.mass_train,
        t=wv.t,
        trace=json.dumps(trace),
        description=json.dumps(group_description(desc, te.s, te.y, g, y_value)),
        rules=rules,
        rule_fidelity=fidelity,
    )


def run_split(
    sample: MDFASample, *, split: int, seed: int, params: MDFAParams,
    state: SplitState | None = None,
) -> SplitResult:
    """One random train/test split of mdfa: balance, certify, worst violation, describe.

    Parameters
    ----------
    sample:
        The collected sample of one attribute.
    split:
        Split number (recorded only; the randomness comes from ``seed``).
    seed:
        Seed of this split (e.g. ``ctx.seed_for("mdfa", attribute, split)``); the
        result depends on nothing else, so any parallel layout gives the same numbers.
    params:
        The audit parameters.
    state:
        The split's :func:`balance_split` result, when already computed for rows with
        the same x and s, the same ``seed`` and ``params`` (the decisions may differ);
        None computes it.

    Returns
    -------
    SplitResult
        The gammas, the null draw's gammas (when ``sample.p_null`` is set), and with
        ``params.worst_violation`` Algorithm 1's answer.
    """
    import time

    import torch

    torch.set_num_threads(1)
    c0 = time.process_time()
    if state is None:
        st = balance_split(sample, seed=seed, params=params, split=split)
    else:  # the state's decisions may be another outcome vector's: take this sample's
        y = sample.y.astype(int)
        st = dataclasses.replace(
            state, train=dataclasses.replace(state.train, y=y[state.tr]),
            test=dataclasses.replace(state.test, y=y[state.te]),
        )
    c1 = time.process_time()
    gamma_pos, gamma_neg = _certificate_gammas(st, seed=seed, params=params)
    c2 = time.process_time()
    null = _null_gammas(st, sample, split=split, seed=seed, params=params)
    c3 = time.process_time()
    b = st.balance
    out = SplitResult(split=int(split), gamma_pos=gamma_pos, gamma_neg=gamma_neg,
                      gamma_max=max(gamma_pos, gamma_neg), n_train=len(st.tr),
                      n_test=len(st.te), l2=st.l2, mmd=st.mmd,
                      balance_auc=b.auc, balance_auc_before=b.auc_before,
                      max_abs_smd_before=b.max_abs_smd_before,
                      max_abs_smd_after=b.max_abs_smd_after, balance_poor=int(b.poor),
                      smd=json.dumps([[nan_to_none(x), nan_to_none(y)] for x, y
                                      in zip(b.smd_before, b.smd_after, strict=True)]),
                      **_outcome_gaps(st, sample), **null,
                      cpu_balance=c1 - c0, cpu_certificate=c2 - c1,
                      cpu_null=(c3 - c2) if null else None)
    if not params.worst_violation or (params.violation_splits is not None
                                      and split >= params.violation_splits):
        return out
    out = _with_violation(out, st, sample, seed=seed, params=params)
    return dataclasses.replace(out, cpu_violation=time.process_time() - c3)

