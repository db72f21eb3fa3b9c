"""The public API: explicit, complete and sorted `__all__` in every module."""

from __future__ import annotations

import importlib
import pkgutil

import pytest

import tlmscore

ALL_MODULES = sorted(m.name for m in pkgutil.walk_packages(tlmscore.__path__, "tlmscore.")
                     if m.name != "tlmscore.__main__")
MODULES = [m for m in ALL_MODULES if not any(part.startswith("_") for part in m.split("."))]
PRIVATE = [m for m in ALL_MODULES if m not in MODULES]


def isort_key(name: str) -> tuple[int, str]:
    """Constants, then classes, then functions, as ruff's RUF022 orders `__all__`."""
    if name.isupper():
        return (0, name)
    return (1 if name[0].isupper() else 2, name)


@pytest.mark.parametrize("name", ["tlmscore", *MODULES])
def test_all_is_sorted_and_names_exist(name: str) -> None:
    module = importlib.import_module(name)
    exported = module.__all__
    assert exported == sorted(exported, key=isort_key)
    assert all(hasattr(module, n) for n in exported)


@pytest.mark.parametrize("name", PRIVATE)
def test_private_modules_export_nothing(name: str) -> None:
    # `__all__` marks what users may rely on; a private module's names are its package's business.
    assert not hasattr(importlib.import_module(name), "__all__")


def test_top_level_exports_every_public_name() -> None:
    modules = type(tlmscore)
    public = {n for n, v in vars(tlmscore).items()
              if not n.startswith("_") and n != "annotations" and not isinstance(v, modules)}
    assert public <= set(tlmscore.__all__)


def test_contract_entry_points_exist() -> None:
    from tlmscore import compat

    assert callable(tlmscore.read_transcripts) and callable(tlmscore.prepare)
    assert callable(compat.form_prompt_string) and callable(compat.form_response_string_responses_api)
