"""The paths and options of a run, checked before any work starts: each problem is one line, exit 2.

A run that would fail at its end (an output path that is a folder, a folder that cannot be
written) fails here instead, before a single page is fetched.
"""

from __future__ import annotations

import errno
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from tlmscore.errors import ConfigError
from tlmscore.ingest import check_readable
from tlmscore.output import output_format


def check_files(paths: Iterable[Path], *, what: str, folders: bool = False) -> None:
    """Each of `paths` is a readable file (with `folders`, or a folder); a `ConfigError` names the first not."""
    for path in paths:
        if folders and path.is_dir():
            continue
        if path.is_dir():
            raise ConfigError(f"{path}: is a folder; give the {what} files in it (e.g. {path}/*.jsonl)")
        if not path.is_file():
            raise ConfigError(f"{path}: no such file" + ("" if what == "input" else f" ({what})"))
        check_readable(path)


def _existing_parent(path: Path) -> Path:
    """The nearest ancestor of `path` that exists (`path`'s own folder for a relative name)."""
    parent = path.absolute().parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    return parent


def check_output(output: Path) -> None:
    """`output` can be written: a file of a known format in a writable folder."""
    output_format(output)
    if output.is_dir():
        raise ConfigError(f"{output}: is a folder; OUT must be a file name such as {output / 'scores.parquet'}")
    parent = output.absolute().parent
    if not parent.exists():
        above = _existing_parent(output)
        if not above.is_dir():
            raise ConfigError(f"{output}: cannot be written: {above} is a file, not a folder")
        raise ConfigError(f"{output}: cannot be written: no folder {parent}")
    if not parent.is_dir():
        raise ConfigError(f"{output}: cannot be written: {parent} is a file, not a folder")
    try:
        with tempfile.NamedTemporaryFile(dir=parent, prefix=".tlmscore-check-"):
            pass
    except OSError as exc:
        if exc.errno == errno.ENOENT:  # the folder is there (checked above) but makes no new files (/proc, /sys)
            raise ConfigError(f"{output}: cannot be written: {parent} takes no new files") from None
        raise ConfigError(f"{output}: cannot be written: {parent}: {exc.strerror or exc}") from None


def check_scorer(scorer: str, options: dict[str, Any]) -> None:
    """Options a scorer cannot start without, named by their flags (the judge needs a model)."""
    if scorer == "judge" and not options.get("model"):
        raise ConfigError("--scorer judge needs --model NAME (the judge model's name at --base-url)")


_PAGE_MODEL_FLAGS = {"page_base_url": "--page-base-url", "page_model": "--page-model",
                     "page_api_key_env": "--page-api-key-env", "page_concurrency": "--page-concurrency",
                     "page_price_in": "--page-price-in", "page_price_out": "--page-price-out",
                     "page_price_request": "--page-price-request", "page_max_cost": "--page-max-cost"}


def check_page_model(args: Any) -> None:
    """The page model's flags: given only with `--page-source chat`, which needs an endpoint, a model and its key."""
    source = getattr(args, "page_source", None) or "fetch"
    given = [flag for name, flag in _PAGE_MODEL_FLAGS.items() if getattr(args, name, None) is not None]
    if source == "fetch":
        if given:
            raise ConfigError(f"{', '.join(given)}: only with --page-source chat or chat:always")
        return
    missing = [flag for name, flag in list(_PAGE_MODEL_FLAGS.items())[:2] if not getattr(args, name, None)]
    if missing:
        raise ConfigError(f"--page-source {source} needs {' and '.join(missing)} (the page model's API root and name)")
    variable = getattr(args, "page_api_key_env", None)
    if variable and not os.environ.get(variable):
        raise ConfigError(f"--page-api-key-env: the environment variable {variable} is not set")
