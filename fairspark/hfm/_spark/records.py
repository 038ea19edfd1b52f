"""The named records the passes of the certified elimination exchange.

The sample of pass A (:class:`Sample`), the blocks of pass C (:class:`Blocks`) and the
pairs it checks (:class:`PassCTarget`), the queries of the exact scans
(:class:`ScanQuery`) and the rows they read (:class:`ScanRows`, with what a row range
reuses, :class:`RangeCache`), pass C's counts per pair (:class:`PassCStats`) and the
kind of each of its output rows (:class:`RowKind`), the largest bounds of a pair
(:class:`TopBound`), and the driver engine's key-sorted points
(:class:`KeySortedPoints`).
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np
import pandas as pd
import pyarrow as pa

from fairspark.hfm._kernels import Clusters
from fairspark.hfm._spark.state import Pair

__all__ = ["Blocks", "KeySortedPoints", "PassAMarker", "PassARanges", "PassCOutput", "PassCStats",
           "PassCTarget", "RangeCache", "RowKind", "Sample", "ScanQuery", "ScanRows",
           "TopBound"]


class TopBound(NamedTuple):
    """One of the largest bounds of a pair, ordered as the search takes them: the bound
    negated (largest first), then the key, then the neighbour key (``""`` when none)."""

    neg_u: float
    key: str
    nb_key: str


@dataclass(frozen=True, slots=True)
class PassAMarker:
    """What one task of pass A sends in its marker row: per pair its ``k`` largest
    bounds and the summary part of its rows' bounds
    (:func:`~fairspark.hfm._kernels.value_part` with the witness ``w``)."""

    top: dict[Pair, list[TopBound]]
    summary: dict[Pair, dict]


@dataclass(frozen=True, slots=True)
class Sample:
    """Pass A's sample: the rows that give every row its upper bound, key-sorted.

    Attributes
    ----------
    keys:
        Their keys (object array of ``str``, sorted).
    points:
        Their points ``[yp, y, x]``.
    codes:
        Per code column (``c0 ..``) their group codes (nulls as ``NULL_CODE``).
    counts:
        Rows of the whole table per (attribute index, code) (the ranks' scale).
    """

    keys: np.ndarray
    points: np.ndarray
    codes: dict[str, np.ndarray]
    counts: dict[int, dict[int, int]]


@dataclass(frozen=True, slots=True)
class Blocks:
    """The blocks of pass C (the rows of every code with ``q <= rho < R``), key-sorted.

    Attributes
    ----------
    points:
        Their points ``[yp, y, x]``.
    keys:
        Their keys (object array of ``str``).
    codes, ranks:
        Per attribute index their group codes and ranks ``rho``.
    counts:
        Rows of the whole table per (attribute index, code).
    """

    points: np.ndarray
    keys: np.ndarray
    codes: dict[int, np.ndarray]
    ranks: dict[int, np.ndarray]
    counts: dict[int, dict[int, int]]


@dataclass(frozen=True, slots=True)
class PassCTarget:
    """A pair pass C checks: rows with a bound at least ``threshold`` (and after
    ``cursor``, the ``(bound, key)`` of the last row already taken) enter."""

    tgt: int
    attr: int
    threshold: float
    cursor: tuple[float, str] | None

    @property
    def pair(self) -> Pair:
        """``(tgt, attr)``."""
        return (self.tgt, self.attr)


class RowKind(enum.IntEnum):
    """The kind of a row of pass C's output (its ``kind`` column)."""

    #: per block: the rows eliminated (``n``) and their largest bound (``mx``)
    ELIMINATED = 0
    #: a row left after every block, with its vector (pass D takes it)
    SURVIVOR = 1
    #: a row whose blocks covered its whole other side: its exact ``nn`` (``d``)
    EXACT = 2
    #: per block: the rows made exact (``n``)
    MADE_EXACT = 3
    #: the rows that entered the pass (``n``)
    ENTERED = 4
    #: the rows left after every block (``n``) and their largest bound (``mx``)
    SURVIVED = 5


@dataclass(slots=True)
class PassCStats:
    """One pair's counts of pass C in one task, per block and in all."""

    eliminated: np.ndarray
    max_eliminated: np.ndarray
    made_exact: np.ndarray
    entered: int = 0
    survived: int = 0
    max_survivor: float = -math.inf

    @classmethod
    def empty(cls, n_blocks: int) -> PassCStats:
        """No row counted yet, over ``n_blocks`` blocks."""
        return cls(eliminated=np.zeros(n_blocks, np.int64),
                   max_eliminated=np.full(n_blocks, -np.inf),
                   made_exact=np.zeros(n_blocks, np.int64))


@dataclass(frozen=True, slots=True)
class PassCOutput:
    """What pass C returns to the algorithm: every output row but the survivors
    (``small``, pandas, without vectors) and the survivors (a persisted Spark
    DataFrame, or a pandas frame on the driver engine; released by the engine)."""

    small: pd.DataFrame
    survivors: Any


@dataclass(frozen=True, slots=True)
class ScanQuery:
    """Query rows of one pair for an exact scan: their points ``[t, x]`` and codes."""

    tgt: int
    attr: int
    points: np.ndarray
    codes: np.ndarray


@dataclass(slots=True)
class RangeCache:
    """What the scans of one row range reuse: each target's points ``[t, x]`` and,
    per attribute index, the rows' clusters."""

    points: dict[int, np.ndarray] = field(default_factory=dict)
    clusters: dict[int, Clusters] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ScanRows:
    """The rows an exact scan reads, key-sorted: points ``[yp, y, x]``, keys (numpy
    object array or Arrow string array), per attribute index the ranks and codes."""

    points: np.ndarray
    keys: np.ndarray | pa.Array
    ranks: dict[int, np.ndarray]
    codes: dict[int, np.ndarray]
    cache: RangeCache


@dataclass(slots=True)
class PassARanges:
    """What pass A on the driver engine keeps for the later scans: the points, the row
    ranges it searched apart and each range's :class:`RangeCache`."""

    points: np.ndarray | None = None
    ranges: list[slice] = field(default_factory=list)
    caches: list[RangeCache] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class KeySortedPoints:
    """The driver engine's table: one key-sorted Arrow batch (without ``x``) and its
    points ``[yp, y, x]``."""

    batch: pa.RecordBatch
    points: np.ndarray
