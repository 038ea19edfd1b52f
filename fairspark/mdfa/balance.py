"""MMD balancing network (Gitiaux and Rangwala, 2019, §3.2), in torch.

A small net maps the audit features x to a weight ``u = e^z / (1 + e^z / 10)`` in
(0, 10) for the s = +1 rows such that the u-weighted distribution of phi(x) over
s = +1 matches the one over s = -1 (maximum mean discrepancy with the kernel of phi).
Its 8-unit representation layer is the feature map the certificate is trained on.

References
----------
.. [1] X. Gitiaux and H. Rangwala, "Multi-Differential Fairness Auditor for Black Box
   Classifiers", arXiv:1903.07609, 2019.
"""

from __future__ import annotations

import math
import threading
from concurrent.futures import Executor
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from fairspark.stats import normal_quantile

__all__ = ["BalancingNet", "BalancingOptions", "BalancingResult", "balanced_weights",
           "fit_balancing",
           "mmd_features", "mmd_phi"]

#: random Fourier features of the ``gaussian`` kernel
RFF_DIM = 64
#: a net's initialisation reads torch's global generator: seeding it and building the
#: net are one step, so nets trained in several threads get the serial run's weights
_INIT_LOCK = threading.Lock()


def mmd_phi(x: torch.Tensor, kernel: str, *, seed: int = 0) -> torch.Tensor:
    """The explicit feature map of the MMD kernel.

    ``linear``: x; ``quadratic``: x and all pairwise products (second moments);
    ``gaussian``: x and ``RFF_DIM`` random Fourier features of a Gaussian kernel with
    bandwidth sqrt(d), scaled so that the block weighs as much as x (seeded by
    ``seed``).
    """
    if kernel == "linear":
        return x
    if kernel == "quadratic":
        d = x.shape[1]
        iu = torch.triu_indices(d, d)
        prods = (x[:, :, None] * x[:, None, :])[:, iu[0], iu[1]]
        return torch.cat([x, prods], dim=1)
    if kernel == "gaussian":
        d = x.shape[1]
        gen = torch.Generator().manual_seed(seed % (2**63))
        w = torch.randn(d, RFF_DIM, generator=gen, dtype=x.dtype) / math.sqrt(d)
        b = torch.rand(RFF_DIM, generator=gen, dtype=x.dtype) * (2 * math.pi)
        rff = math.sqrt(2.0 * d / RFF_DIM) * torch.cos(x @ w + b)
        return torch.cat([x, rff], dim=1)
    raise ValueError(f"unknown mmd kernel {kernel!r}; expected 'linear', 'quadratic' or "
                     "'gaussian'")


def mmd_features(x: np.ndarray, transform: str) -> np.ndarray:
    """The features the MMD compares: ``standardised`` (x as given) or ``rank`` (each
    column's normal scores, ``Phi^-1((rank - 1/2) / n)`` with average ranks for ties).

    The rank map keeps the order of every feature but bounds the tails, so the squares
    of heavy-tailed counts (COMPAS priors) do not dominate a quadratic MMD.
    """
    if transform == "standardised":
        return np.asarray(x, dtype=np.float32)
    if transform == "rank":
        from scipy.stats import rankdata

        x = np.asarray(x, dtype=float)
        n = len(x)
        if n == 0:
            return x.astype(np.float32)
        z = normal_quantile((rankdata(x, axis=0) - 0.5) / n)
        return (z - z.mean(0)).astype(np.float32)
    raise ValueError(f"unknown mmd feature map {transform!r}; expected 'standardised' or "
                     "'rank'")


class BalancingNet(nn.Module):
    """4 x 8 ReLU layers, an 8-unit representation layer, one output -> u in (0, 10)."""

    def __init__(self, n_features: int, width: int = 8):
        super().__init__()
        layers: list[nn.Module] = []
        d = n_features
        for _ in range(4):
            layers += [nn.Linear(d, width), nn.ReLU()]
            d = width
        self.body = nn.Sequential(*layers)
        self.rep = nn.Linear(width, width)
        self.out = nn.Linear(width, 1)

    def representation(self, x: torch.Tensor) -> torch.Tensor:
        """Output of the representation layer (the certificate's feature map)."""
        return torch.relu(self.rep(self.body(x)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        z = self.out(self.representation(x)).squeeze(-1)
        # e^z / (1 + e^z / 10) = 10 * sigmoid(z - ln 10), computed without overflow
        return 10.0 * torch.sigmoid(z - math.log(10.0))


def _mmd_loss(u: torch.Tensor, f: torch.Tensor, pos: torch.Tensor,
             kernel: str) -> torch.Tensor:
    """|| sum_{s=+1} u phi / sum_{s=+1} u - mean_{s=-1} phi ||_2, ``phi = mmd_phi(f)``,
    without forming ``phi`` for ``quadratic``.

    The u-weighted mean is self-normalised (the loss as written for Gitiaux and
    Rangwala, 2019, §3.2, is mean(u phi)); with features near zero mean the
    unnormalised form is minimised by u -> 0, which balances nothing. The masses are
    fixed afterwards by :func:`balanced_weights`.

    The difference of the two means is ``sum_i c_i phi(f_i)`` with
    ``c_i = u_i / sum_{s=+1} u`` on s = +1 and ``-1 / n_{s=-1}`` on s = -1. For the
    quadratic map its product block is the upper triangle (with the diagonal) of the
    symmetric ``M = F^T diag(c) F``, whose squared norm is
    ``(||M||_F^2 + ||diag M||^2) / 2``: one d x d product per batch instead of a
    ``d (d + 1) / 2``-column table (1,325 columns at d = 50, 40% of a default split's
    time). For ``linear`` and ``gaussian``, ``f`` is the feature map itself.
    """
    p = pos.to(f.dtype)
    n_pos, n_neg = p.sum(), (1.0 - p).sum()
    if n_pos == 0 or n_neg == 0:
        return torch.zeros((), dtype=f.dtype)
    up = u * p
    c = up / up.sum() - (1.0 - p) / n_neg
    lin = f.T @ c
    if kernel != "quadratic":
        return torch.linalg.vector_norm(lin)
    m = (f * c[:, None]).T @ f
    sq = lin.pow(2).sum() + 0.5 * (m.pow(2).sum() + torch.diagonal(m).pow(2).sum())
    return torch.sqrt(sq)


@dataclass(frozen=True)
class BalancingOptions:
    """How the balancing net is trained (the defaults are the paper's).

    Attributes
    ----------
    kernel:
        Feature map of the MMD (:func:`mmd_phi`).
    feature_map:
        What the MMD compares (:func:`mmd_features`); the net's input is ``x`` itself.
    epochs, batch_size, learning_rate:
        Adam over mini-batches of the training rows.
    l2_grid, folds:
        The L2 strengths searched and the folds of the held-out MMD that picks one.
    """

    kernel: str = "linear"
    feature_map: str = "standardised"
    epochs: int = 30
    batch_size: int = 512
    learning_rate: float = 1e-3
    l2_grid: tuple[float, ...] = (1e-4, 1e-3, 1e-2)
    folds: int = 5


@dataclass
class BalancingResult:
    """A trained balancing net and the L2 strength that was chosen."""

    net: BalancingNet | None
    l2: float | None
    heldout_loss: float | None

    def u(self, x: np.ndarray) -> np.ndarray:
        """Raw weights u(x) in (0, 10) (all ones for uniform balancing)."""
        if self.net is None:
            return np.ones(len(x))
        with torch.no_grad():
            return self.net(torch.as_tensor(x, dtype=torch.float32)).numpy().astype(float)

    def representation(self, x: np.ndarray) -> np.ndarray:
        """The 8-unit representation of x (x itself for uniform balancing)."""
        if self.net is None:
            return np.asarray(x, dtype=float)
        with torch.no_grad():
            t = torch.as_tensor(x, dtype=torch.float32)
            return self.net.representation(t).numpy().astype(float)


def _train_one(
    x: np.ndarray,
    feats: torch.Tensor,
    pos: np.ndarray,
    *,
    options: BalancingOptions,
    l2: float,
    seed: int,
) -> BalancingNet:
    gen = torch.Generator().manual_seed(seed % (2**63))
    with _INIT_LOCK:
        torch.manual_seed(seed % (2**63))
        net = BalancingNet(x.shape[1])
    opt = torch.optim.Adam(net.parameters(), lr=options.learning_rate, fused=True)
    kernel, batch_size = options.kernel, options.batch_size
    xt = torch.as_tensor(x, dtype=torch.float32)
    pt = torch.as_tensor(pos)
    n = len(x)
    for _ in range(options.epochs):
        order = torch.randperm(n, generator=gen)
        for start in range(0, n, batch_size):
            idx = order[start : start + batch_size]
            u = net(xt[idx])
            loss = _mmd_loss(u, feats[idx], pt[idx], kernel)
            if l2 > 0:
                loss = loss + l2 * net.rep.weight.pow(2).sum()
            opt.zero_grad()
            loss.backward()
            opt.step()
    return net


def fit_balancing(
    x: np.ndarray,
    s: np.ndarray,
    *,
    seed: int,
    options: BalancingOptions | None = None,
    l2: float | None = None,
    pool: Executor | None = None,
) -> BalancingResult:
    """Train the balancing net; pick the L2 strength by held-out MMD.

    For each L2 strength of ``l2_grid`` a net is trained on ``folds - 1`` folds and its
    MMD is measured on the remaining fold; the net with the lowest held-out MMD is
    returned (it is not retrained). With ``l2`` given only that strength is trained
    (same folds and, when ``l2`` is in ``l2_grid``, the same net initialisation as the
    grid's net of that strength, so the result equals the grid search's whenever the
    grid search picks ``l2``). Deterministic given ``seed`` (single-threaded torch).

    Parameters
    ----------
    x:
        Standardised audit features ``(n, d)``.
    s:
        Sensitive attribute in {-1, +1}.
    seed:
        Seed of the fold split, the initialisation, the batch order and the random
        features of the ``gaussian`` kernel.
    options:
        How the net is trained (:class:`BalancingOptions`; None: the paper's defaults).
    l2:
        Train only this L2 strength (chosen beforehand, e.g. by :func:`choose_l2` on
        another split); None searches ``l2_grid``.
    pool:
        Train the grid's nets in this executor's threads (each net single-threaded, so
        the result is the serial one to the bit); None trains them one after another.
    """
    opts = options or BalancingOptions()
    kernel, folds, l2_grid = opts.kernel, opts.folds, opts.l2_grid
    x = np.asarray(x, dtype=np.float32)
    feats = torch.as_tensor(mmd_features(x, opts.feature_map))
    if kernel != "quadratic":  # quadratic: _mmd_loss forms the products per batch
        feats = mmd_phi(feats, kernel, seed=seed + 104729)
    pos = np.asarray(s) > 0
    rng = np.random.default_rng(seed)
    fold = rng.integers(0, folds, len(x))
    train, held = fold != 0, fold == 0
    if held.sum() == 0 or train.sum() == 0:
        train = held = np.ones(len(x), dtype=bool)
    xh = torch.as_tensor(x[held])
    grid = list(enumerate(l2_grid))
    if l2 is not None:  # the grid index k keeps the seed of the grid's net of that l2
        grid = [next(((k, v) for k, v in grid if float(v) == float(l2)), (0, l2))]

    def fit_one(k: int, strength: float) -> BalancingNet:
        return _train_one(x[train], feats[torch.as_tensor(train)], pos[train],
                          options=opts, l2=float(strength), seed=seed + 7919 * (k + 1))

    if pool is None or len(grid) < 2:
        nets = [fit_one(k, v) for k, v in grid]
    else:
        nets = [f.result() for f in [pool.submit(fit_one, k, v) for k, v in grid]]
    best: tuple[float, float, BalancingNet] | None = None
    for (_, strength), net in zip(grid, nets, strict=True):  # the serial order of choice
        with torch.no_grad():
            loss = float(_mmd_loss(net(xh), feats[torch.as_tensor(held)],
                                        torch.as_tensor(pos[held]), kernel))
        if best is None or loss < best[0]:
            best = (loss, float(strength), net)
    assert best is not None
    return BalancingResult(net=best[2], l2=best[1], heldout_loss=best[0])


def balanced_weights(u: np.ndarray, s: np.ndarray) -> np.ndarray:
    """Final row weights: u for s = +1 rescaled to the count of s = -1 rows, 1 for s = -1.

    After this Pr_w[S = +1] = 1/2, which Lemma 3.1's reduction assumes.
    """
    s = np.asarray(s)
    w = np.ones(len(s), dtype=float)
    pos = s > 0
    total = float(np.sum(u[pos]))
    if total > 0:
        w[pos] = np.asarray(u, dtype=float)[pos] * ((~pos).sum() / total)
    return w
