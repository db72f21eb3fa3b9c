"""Engines that run the pipeline's stages over many machines; `tlmscore.ray` is the public entry.

The Ray Data engine (extra `tlmscore[ray]`): `_read` reads inputs as datasets, `_links` resolves
chains by joins, `_pages` fetches unique URLs grouped by host into a page store, `_rows` renders and
scores, `_tables` holds the Arrow schemas, `_command` runs it for the command line (`run_ray`).
"""

from tlmscore.engines._command import run_ray

__all__ = ["run_ray"]
