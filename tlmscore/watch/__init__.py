"""`tlmscore watch`: score a live store's calls as they arrive, and write the scores back onto them.

The same run as `tlmscore score`, over a store's new calls since a saved cursor, batch after batch:

- `_feeds`: what is read (a Phoenix project, an MLflow experiment): a store's calls newer than a
  time, and the identities already annotating them.
- `_state`: the cursor (and the spend windows, the counts), saved atomically after each batch.
- `_choose`: which calls: `--sample` by a hash of the trace id, `--where` on model, metadata, tools.
- `_identity`: who scored: scorer, tlmscore version, hash of the settings that change a score.
- `_spend`: `--max-cost-per-hour` / `--max-cost-per-day`, held to the request.
- `_status`: the counts and the one status line.
- `_loop`: `watch`, the async iterator of rows that ties them together.
"""

from __future__ import annotations

import sys
import types
from collections.abc import AsyncIterator
from typing import Any

from tlmscore.output import Row
from tlmscore.watch._choose import Condition, check_rate, kept, parse_where, sample_key, sampled, tool_kinds
from tlmscore.watch._identity import Evaluator, evaluator_of
from tlmscore.watch._loop import Hooks, Plan, watch
from tlmscore.watch._spend import OVER_CAP, Capped, Spend, check_capped
from tlmscore.watch._state import State, load_state, parse_time, save_state
from tlmscore.watch._status import Counts, StatusLine

__all__ = ["OVER_CAP", "Capped", "Condition", "Counts", "Evaluator", "Hooks", "Plan", "Spend", "State", "StatusLine",
           "check_capped", "check_rate", "evaluator_of", "kept", "load_state", "parse_time", "parse_where",
           "sample_key", "sampled", "save_state", "tool_kinds", "watch"]


class _CallableModule(types.ModuleType):
    """The package, callable as `watch`: `tlmscore.watch(...)` is the same call once the package is imported."""

    def __call__(self, *args: Any, **kwargs: Any) -> AsyncIterator[Row]:
        return watch(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
