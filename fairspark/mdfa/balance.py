"""MMD balancing network (paper Sec. 3.2, METHODS §2), in torch.

A small net maps the audit features x to a weight ``u = e^z / (1 + e^z / 10)`` in
(0, 10) for the s = +1 rows such that the u-weighted distribution of phi(x) over
s = +1 matches the one over s = -1 (maximum mean discrepancy with the kernel of phi).
Its 8-unit representation layer is the feature map the certificate is trained on.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

__all__ = ["BalancingNet", "BalancingResult", "balanced_weights", "fit_balancing", "mmd_phi"]


def mmd_phi(x: torch.Tensor, kernel: str) -> torch.Tensor:
    """The explicit feature map of the MMD kernel: ``linear`` or ``quadratic``."""
    if kernel == "linear":
        return x
    if kernel == "quadratic":
        d = x.shape[1]
        iu = torch.triu_indices(d, d)
        prods = (x[:, :, None] * x[:, None, :])[:, iu[0], iu[1]]
        return torch.cat([x, prods], dim=1)
    raise ValueError(f"unknown mmd kernel {kernel!r}; expected 'linear' or 'quadratic'")


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


def _mmd_loss(u: torch.Tensor, phi: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
    """|| sum_{s=+1} u phi / sum_{s=+1} u - mean_{s=-1} phi ||_2.

    The u-weighted mean is self-normalised (METHODS writes mean(u phi)); with
    features near zero mean the unnormalised form is minimised by u -> 0, which
    balances nothing. The masses are fixed afterwards by :func:`balanced_weights`.
    """
    if pos.sum() == 0 or (~pos).sum() == 0:
        return torch.zeros((), dtype=phi.dtype)
    up = u[pos]
    m_pos = (up[:, None] * phi[pos]).sum(0) / up.sum()
    m_neg = phi[~pos].mean(0)
    return torch.linalg.vector_norm(m_pos - m_neg)


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
    pos: np.ndarray,
    *,
    l2: float,
    kernel: str,
    epochs: int,
    batch_size: int,
    lr: float,
    seed: int,
) -> BalancingNet:
    gen = torch.Generator().manual_seed(seed % (2**63))
    torch.manual_seed(seed % (2**63))
    net = BalancingNet(x.shape[1])
    opt = torch.optim.Adam(net.parameters(), lr=lr)
    xt = torch.as_tensor(x, dtype=torch.float32)
    pt = torch.as_tensor(pos)
    phi_all = mmd_phi(xt, kernel)
    n = len(x)
    for _ in range(epochs):
        order = torch.randperm(n, generator=gen)
        for start in range(0, n, batch_size):
            idx = order[start : start + batch_size]
            u = net(xt[idx])
            loss = _mmd_loss(u, phi_all[idx], pt[idx])
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
    kernel: str = "linear",
    epochs: int = 30,
    batch_size: int = 512,
    learning_rate: float = 1e-3,
    l2_grid: list[float] | tuple[float, ...] = (1e-4, 1e-3, 1e-2),
    folds: int = 5,
) -> BalancingResult:
    """Train the balancing net; pick the L2 strength by held-out MMD.

    For each L2 strength of ``l2_grid`` a net is trained on ``folds - 1`` folds and its
    MMD is measured on the remaining fold; the net with the lowest held-out MMD is
    returned (it is not retrained). Deterministic given ``seed`` (single-threaded
    torch).

    Parameters
    ----------
    x:
        Standardised audit features ``(n, d)``.
    s:
        Sensitive attribute in {-1, +1}.
    seed:
        Seed of the fold split, the initialisation and the batch order.
    """
    x = np.asarray(x, dtype=np.float32)
    pos = np.asarray(s) > 0
    rng = np.random.default_rng(seed)
    fold = rng.integers(0, folds, len(x))
    train, held = fold != 0, fold == 0
    if held.sum() == 0 or train.sum() == 0:
        train = held = np.ones(len(x), dtype=bool)
    xh = torch.as_tensor(x[held])
    best: tuple[float, float, BalancingNet] | None = None
    for k, l2 in enumerate(l2_grid):
        net = _train_one(
            x[train],
            pos[train],
            l2=float(l2),
            kernel=kernel,
            epochs=epochs,
            batch_size=batch_size,
            lr=learning_rate,
            seed=seed + 7919 * (k + 1),
        )
        with torch.no_grad():
            loss = float(
                _mmd_loss(net(xh), mmd_phi(xh, kernel), torch.as_tensor(pos[held]))
            )
        if best is None or loss < best[0]:
            best = (loss, float(l2), net)
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
