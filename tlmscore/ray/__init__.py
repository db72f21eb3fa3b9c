"""The Ray engine: the whole pipeline on Ray Data, the same rows as one machine, for log sets too big for one.

`tlmscore.run(inputs, output, ..., engine=tlmscore.ray.Engine(...))` runs on a Ray cluster with
everything a run has on one machine (the same output file, resume rules, `on_rows` and summary):
the engine makes the rows, the run around it saves them. `prepare(inputs, settings)` and
`score(inputs, scorer, settings)` return a `ray.data.Dataset` of rows instead (the output's
columns, plus `position`: sort by it to restore input order, and `input`: the number of the input
file). `read(paths)` is the records of input files as a dataset; `connect(address)` connects to a
cluster as the command line does.

Needs the extra `tlmscore[ray]`; Ray and pyarrow are imported only when a name here is first used.
The operators the engine is built of (`flat_rows`, `grouped`, `join_on_key`, `schema`) are here too.
"""

from __future__ import annotations

import typing as _typing

from tlmscore._lazy import lazy_exports as _lazy_exports

if _typing.TYPE_CHECKING:
    from tlmscore.ray._engine import Engine, connect, prepare, read, score
    from tlmscore.ray._tables import flat_rows, grouped, join_on_key, schema

__all__ = ["Engine", "connect", "flat_rows", "grouped", "join_on_key", "prepare", "read", "schema", "score"]

_HOMES = {name: home for home, names in {
    "tlmscore.ray._engine": ("Engine", "connect", "prepare", "read", "score"),
    "tlmscore.ray._tables": ("flat_rows", "grouped", "join_on_key", "schema"),
}.items() for name in names}

__getattr__, __dir__ = _lazy_exports(__name__, _HOMES, __all__, globals())
