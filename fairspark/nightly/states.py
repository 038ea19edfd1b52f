"""The published states of a window's partitions (``<output>/_states``).

One folder per partition and definition, ``state.json`` written last
(:mod:`fairspark.nightly.window` says what a state holds). A state that cannot be read
is named as a *state*, with its path: a corrupt ``state.json`` is aggregated again,
a corrupt stored sample ends the run (exit 2) with the ``--restate`` that repairs it.
"""

from __future__ import annotations

import json
import logging
import uuid
from typing import TYPE_CHECKING, Any

from fairspark.errors import StateCorruptError, input_read_error

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame

    from fairspark.outputs import OutputLocation

__all__ = ["STATE_FORMAT", "StateStore", "corrupt_sample"]

log = logging.getLogger("fairspark")

#: bumped when what a state holds changes: older states are then not read
STATE_FORMAT = 1
#: what every state.json holds (a file without one of them is a corrupt state)
_STATE_KEYS = ("fingerprint", "groups", "categories", "rows_kept", "sample")


class StateStore:
    """The published states of one definition under ``<output>/_states``."""

    def __init__(self, out: OutputLocation, *, definition: str, column: str):
        self.out = out
        self.definition = definition
        self.column = column
        self.root = out.path("_states", f"definition={definition}")
        #: partition value -> why its published state could not be read (by :meth:`read`)
        self.unreadable: dict[str, str] = {}

    def folder(self, value: str) -> str:
        """The published folder of partition ``value``."""
        return f"{self.root}/{self.column}={value}"

    def read(self, value: str) -> dict[str, Any] | None:
        """The published state of ``value`` (``None``: none, another format, or corrupt).

        A corrupt ``state.json`` (not JSON, or without the keys a state has) is noted
        in :attr:`unreadable` with its path and the reason, and logged: the partition
        is then aggregated again, which replaces it.
        """
        path = f"{self.folder(value)}/state.json"
        if not self.out.exists(path):
            return None
        try:
            state = json.loads(self.out.read_text(path))
            if not isinstance(state, dict):
                raise ValueError(f"a JSON {type(state).__name__}, not an object")
        except Exception as err:  # noqa: BLE001 - an unreadable state is aggregated again
            from fairspark.outputs import one_line

            self.unreadable[value] = f"corrupt state {path} ({one_line(err)[:200]})"
            log.warning("window: %s=%s: %s; aggregating the partition again",
                        self.column, value, self.unreadable[value])
            return None
        if state.get("format") != STATE_FORMAT:
            return None
        lacking = [k for k in _STATE_KEYS if k not in state]
        sample = state.get("sample")
        if not lacking and not (isinstance(sample, dict) and {"rows", "complete", "threshold"}
                                <= set(sample)):
            lacking = ["sample.rows/complete/threshold"]
        if lacking:
            self.unreadable[value] = (f"corrupt state {path} (no {', '.join(lacking)})")
            log.warning("window: %s=%s: %s; aggregating the partition again",
                        self.column, value, self.unreadable[value])
            return None
        return state

    def other_definitions(self) -> list[str]:
        """Definitions (hashes) other than this one that have states here."""
        return sorted(name.split("=", 1)[1]
                      for name, _ in self.out.entries(self.out.path("_states"))
                      if name.startswith("definition=")
                      and name != f"definition={self.definition}")

    def write(self, value: str, state: dict[str, Any], sample: DataFrame | None) -> None:
        """Publish the state of ``value``: staged, ``state.json`` last, then renamed.

        An earlier state of the partition is renamed aside and deleted once the new
        one is in place; a folder without ``state.json`` is never read.
        """
        from fairspark._testing import fault_point

        tmp = f"{self.root}/_tmp-{self.column}={value}-{uuid.uuid4().hex[:12]}"
        final = self.folder(value)
        try:
            fault_point("states:write")
            if sample is not None:
                sample.coalesce(1).write.mode("overwrite").parquet(f"{tmp}/sample.parquet")
            self.out.write_text(f"{tmp}/state.json", json.dumps(state, default=str))
            fault_point("states:staged")
            old = None
            if self.out.exists(final):
                old = f"{self.root}/_old-{self.column}={value}-{uuid.uuid4().hex[:12]}"
                self.out.rename(final, old)
            try:
                self.out.rename(tmp, final)
            except BaseException:
                if old is not None:
                    self.out.rename(old, final)
                raise
            if old is not None:
                self.out.delete(old)
        except BaseException:
            self.out.discard(tmp)
            raise

    def cleanup(self) -> list[str]:
        """Delete what killed runs left (``_tmp-`` and ``_old-`` folders)."""
        done = []
        for name, _ in self.out.entries(self.root):
            if name.startswith(("_tmp-", "_old-")):
                final = self.folder(name.split("=", 1)[1].rsplit("-", 1)[0])
                if name.startswith("_old-") and not self.out.exists(f"{final}/state.json"):
                    self.out.delete(final)
                    self.out.rename(f"{self.root}/{name}", final)
                    done.append(f"restored the state {final}")
                    continue
                self.out.delete(f"{self.root}/{name}")
                done.append(f"deleted the leftover {self.root}/{name}")
        return done


def corrupt_sample(err: Exception, store: StateStore,
                   values: list[str]) -> StateCorruptError | None:
    """A :class:`StateCorruptError` for a stored sample Spark cannot read (else ``None``).

    The state is the one whose ``sample.parquet`` Spark's message names; the message
    gives the ``--restate`` that aggregates that partition again.
    """
    mapped = input_read_error(err, source="the window's stored samples")
    if mapped is None:
        return None
    text = str(err)
    hit = [v for v in values if f"{store.column}={v}/sample.parquet" in text]
    cause = str(mapped).split(": ", 1)[-1]
    if hit:
        v = hit[0]
        return StateCorruptError(
            f"corrupt state of {store.column}={v}: its sample "
            f"{store.folder(v)}/sample.parquet cannot be read ({cause}); run again with "
            f"--restate {v} to aggregate that partition again and replace its state")
    restates = " ".join(f"--restate {v}" for v in values)
    return StateCorruptError(
        f"corrupt state under {store.root}: a stored sample cannot be read ({cause}); "
        f"run again with --restate <date> for the partition it names (all of the window: "
        f"{restates})")
