"""Engines that run the pipeline's stages over many machines; `tlmscore.ray` is the public entry.

The Ray Data engine (extra `tlmscore[ray]`): `_read` reads inputs as datasets, `_links` resolves
chains by joins, `_pages` fetches unique URLs grouped by host into a page store, `_rows` renders and
scores, `_tables` holds the Arrow schemas, the joins and the group-bys, `_command` runs it for the
command line (`run_ray`).

The command line imports this package for `run_ray`; the operators `tlmscore.ray` puts together
are imported on first use (they need pyarrow), so the command line's start does not load them.
"""

from __future__ import annotations

import typing as _typing

from tlmscore._lazy import lazy_exports as _lazy_exports
from tlmscore.engines._command import run_ray

if _typing.TYPE_CHECKING:
    from tlmscore.engines._links import with_links
    from tlmscore.engines._pages import FetchPages, planned_urls, store_pages, stored_pages
    from tlmscore.engines._read import input_rows, read_input
    from tlmscore.engines._rows import ScoreRows, convert_row, judged_on_driver, render_rows, with_pages
    from tlmscore.engines._tables import flat_rows, grouped, join_on_key, schema

__all__ = [
    "FetchPages",
    "ScoreRows",
    "convert_row",
    "flat_rows",
    "grouped",
    "input_rows",
    "join_on_key",
    "judged_on_driver",
    "planned_urls",
    "read_input",
    "render_rows",
    "run_ray",
    "schema",
    "store_pages",
    "stored_pages",
    "with_links",
    "with_pages",
]

_HOMES = {
    "with_links": "tlmscore.engines._links",
    "FetchPages": "tlmscore.engines._pages",
    "planned_urls": "tlmscore.engines._pages",
    "store_pages": "tlmscore.engines._pages",
    "stored_pages": "tlmscore.engines._pages",
    "input_rows": "tlmscore.engines._read",
    "read_input": "tlmscore.engines._read",
    "ScoreRows": "tlmscore.engines._rows",
    "convert_row": "tlmscore.engines._rows",
    "judged_on_driver": "tlmscore.engines._rows",
    "render_rows": "tlmscore.engines._rows",
    "with_pages": "tlmscore.engines._rows",
    "flat_rows": "tlmscore.engines._tables",
    "join_on_key": "tlmscore.engines._tables",
    "grouped": "tlmscore.engines._tables",
    "schema": "tlmscore.engines._tables",
}


__getattr__, __dir__ = _lazy_exports(__name__, _HOMES, __all__, globals())
