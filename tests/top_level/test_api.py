"""The public API: explicit, complete and sorted `__all__` in every module."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
from pathlib import Path

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


def signature_names(function: object) -> set[str]:
    """The names a function's parameter and return annotations are written with (`Scorer`, `pd.DataFrame`)."""
    signature = inspect.signature(function)  # type: ignore[arg-type]
    written = [p.annotation for p in signature.parameters.values()] + [signature.return_annotation]
    return {name for text in written if isinstance(text, str) for name in re.findall(r"[A-Za-z_][\w.]*", text)}


def public_names() -> dict[str, object]:
    """Every name a public module of the package exports, and what it is."""
    return {name: getattr(module, name) for module in map(importlib.import_module, MODULES)
            for name in getattr(module, "__all__", ())}


def unexported_classes(functions: list[object], top: set[str], public: dict[str, object]) -> set[str]:
    """Classes of the package the `functions` take or give that `top` does not list."""
    return {name for f in functions for name in signature_names(f)
            if inspect.isclass(public.get(name)) and name not in top}


def test_the_top_level_exports_every_class_its_functions_take_or_give() -> None:
    # What a user passes to `score`, `run`, `render`… (a `Scorer`, an `Engine`, a `Calibration`) is
    # importable from `tlmscore` itself, not only from the module that defines it.
    functions = [getattr(tlmscore, n) for n in tlmscore.__all__ if inspect.isfunction(getattr(tlmscore, n))]
    assert unexported_classes(functions, set(tlmscore.__all__), public_names()) == set()
    assert "Scorer" in unexported_classes(functions, set(tlmscore.__all__) - {"Scorer"}, public_names())


def test_contract_entry_points_do_what_they_promise(demo_path: Path, tmp_path: Path) -> None:
    """One row per record, bad lines included, and cleanlab-tlm's prompt and response strings."""
    from tlmscore import compat

    transcripts = list(tlmscore.read_transcripts(demo_path))
    assert [t.line for t in transcripts] == list(range(1, 18))
    offline = tlmscore.Settings(offline=True, cache_dir=tmp_path)
    rows = tlmscore.prepare(demo_path, offline, pages=tlmscore.MemoryPages({}))
    assert list(rows.line) == list(range(1, 18))
    assert [isinstance(p, str) for p in rows.prompt] == [t.error is None for t in transcripts]
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]
    assert compat.form_prompt_string(messages) == "System: Be brief.\n\nUser: Hi\n\nAssistant:"
    reply = {"id": "r", "object": "response", "output": [{"type": "message", "role": "assistant", "id": "m",
             "status": "completed", "content": [{"type": "output_text", "text": "4", "annotations": []}]}]}
    assert compat.form_response_string_responses_api(reply) == "4"
