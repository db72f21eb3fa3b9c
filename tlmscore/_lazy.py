"""Names a package exports but imports on first use (a module-level `__getattr__`, PEP 562).

A package lists where each name lives; the first access imports that module, keeps the value in
the package's namespace (so later accesses are plain lookups) and returns it.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, MutableMapping, Sequence
from typing import Any


def lazy_exports(package: str, homes: Mapping[str, str], names: Sequence[str],
                 namespace: MutableMapping[str, Any]) -> tuple[Callable[[str], object], Callable[[], list[str]]]:
    """`__getattr__` and `__dir__` for `package`: each of `homes` imported from its module when first asked for."""

    def __getattr__(name: str) -> object:  # noqa: N807  (the module hook's own name)
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(home), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:  # noqa: N807
        return sorted(names)

    return __getattr__, __dir__
