"""Load cleanlab-tlm 1.1.39's own `tests/test_chat.py` (vendored, unchanged) against `tlmscore.compat`.

The reference tests import `cleanlab_tlm.utils.chat`, `cleanlab_tlm.internal.rag` and
`tests.openai_compat`. The module is executed with its own `__import__` (in its `__builtins__`),
which hands it shim modules for those three names and imports everything else as usual: nothing
is added to `sys.modules`, no import hook is installed, and the real cleanlab-tlm (if installed)
is neither imported nor changed. The test functions are then expanded by their `parametrize`
marks into plain callables, one per reference test id.
"""

from __future__ import annotations

import builtins
import functools
import types
import warnings
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tlmscore import compat

REFERENCE = Path(__file__).resolve().parent / "reference" / "cleanlab_tlm_1_1_39"
MODULE_NAME = "cleanlab_tlm_1_1_39_test_chat"


def _form_prompt_chat_completions_api(messages: Any, tools: Any = None) -> str:
    """The reference's Chat Completions formatter, as `form_prompt_string(use_responses=False)`."""
    return compat.form_prompt_string(messages, tools, use_responses=False)


def _form_prompt_responses_api(messages: Any, tools: Any = None, response: Any = None, **kwargs: Any) -> str:
    """The reference's Responses formatter, as `form_prompt_string(use_responses=True)`."""
    return compat.form_prompt_string(messages, tools, use_responses=True, response=response, **kwargs)


def _not_provided(*_args: Any, **_kwargs: Any) -> bool:
    """`cleanlab_tlm.internal.rag._is_tool_call_response`: a RAG helper tlmscore does not provide."""
    raise NotImplementedError("_is_tool_call_response is part of cleanlab-tlm's RAG module, not of its formatters")


def _module(name: str, **attributes: Any) -> types.ModuleType:
    module = types.ModuleType(name)
    module.__dict__.update(attributes)
    return module


def _execute(path: Path, name: str, shims: Mapping[str, types.ModuleType]) -> types.ModuleType:
    """Run the file at `path` as a fresh module whose imports of `shims`' names get the shims."""
    real_import = builtins.__import__

    def importer(target: str, globals_: Any = None, locals_: Any = None, fromlist: Any = (), level: int = 0) -> Any:
        if level == 0 and target in shims:
            return shims[target]
        return real_import(target, globals_, locals_, fromlist, level)

    module = types.ModuleType(name)
    module.__dict__["__file__"] = str(path)
    module.__dict__["__builtins__"] = {**vars(builtins), "__import__": importer}
    exec(compile(path.read_text(encoding="utf-8"), str(path), "exec"), module.__dict__)  # noqa: S102
    return module


@functools.cache
def load(form_prompt_string: Callable[..., str] = compat.form_prompt_string) -> types.ModuleType:
    """The reference test module, importing `tlmscore.compat` where it imports cleanlab-tlm
    (`form_prompt_string` in place of compat's, e.g. with `pages=` bound)."""
    openai_compat = _execute(REFERENCE / "openai_compat.py.txt", "cleanlab_tlm_1_1_39_openai_compat", {})
    chat = _module(
        "cleanlab_tlm.utils.chat",
        form_prompt_string=form_prompt_string,
        form_response_string_chat_completions=compat.form_response_string_chat_completions,
        form_response_string_chat_completions_api=compat.form_response_string_chat_completions_api,
        form_response_string_responses_api=compat.form_response_string_responses_api,
        _form_prompt_chat_completions_api=_form_prompt_chat_completions_api,
        _form_prompt_responses_api=_form_prompt_responses_api,
    )
    rag = _module("cleanlab_tlm.internal.rag", _is_tool_call_response=_not_provided)
    shims = {"cleanlab_tlm.utils.chat": chat, "cleanlab_tlm.internal.rag": rag, "tests.openai_compat": openai_compat}
    return _execute(REFERENCE / "test_chat.py.txt", MODULE_NAME, shims)


@dataclass(frozen=True)
class Case:
    """One reference test id (`name` or `name[param]`, as pytest names it) and how to run it.

    `filters` are the test's `filterwarnings` marks (`action:message`), applied around `run`.
    """

    id: str
    function: Callable[[], object]
    filters: tuple[str, ...] = ()

    def run(self) -> None:
        """Call the test with its warning filters in place, restored afterwards."""
        with warnings.catch_warnings():
            for spec in self.filters:
                action, _, message = spec.partition(":")
                warnings.filterwarnings(action, message=message)  # type: ignore[arg-type]
            self.function()


def _expand(name: str, function: Callable[..., object]) -> Iterator[Case]:
    """A test function, once per value of its `parametrize` mark (the reference uses at most one)."""
    filters = tuple(str(m.args[0]) for m in getattr(function, "pytestmark", []) if m.name == "filterwarnings")
    marks = [m for m in getattr(function, "pytestmark", []) if m.name == "parametrize"]
    if not marks:
        yield Case(name, function, filters)
        return
    (mark,) = marks
    argnames = [a.strip() for a in mark.args[0].split(",")] if isinstance(mark.args[0], str) else list(mark.args[0])
    for value in mark.args[1]:
        values = getattr(value, "values", None)
        label = getattr(value, "id", None)
        if values is None:
            values = (value,) if len(argnames) == 1 else tuple(value)
        if label is None:
            label = "-".join(str(v) for v in values)
        call = functools.partial(function, **dict(zip(argnames, values, strict=True)))
        yield Case(f"{name}[{label}]", call, filters)


def cases(form_prompt_string: Callable[..., str] = compat.form_prompt_string) -> list[Case]:
    """Every test of the reference file, in file order: functions, then methods of test classes
    (`form_prompt_string` as in `load`)."""
    module = load(form_prompt_string)
    found: list[Case] = []
    for name, value in vars(module).items():
        if name.startswith("test_") and isinstance(value, types.FunctionType):
            found.extend(_expand(name, value))
        elif name.startswith("Test") and isinstance(value, type):
            instance = value()
            for attr in vars(value):
                if attr.startswith("test_"):
                    found.extend(_expand(f"{name}::{attr}", getattr(instance, attr)))
    return found
