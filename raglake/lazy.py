"""Names a package lists but loads when first used (PEP 562): importing the package stays cheap, and a
name costs its module's import only when someone asks for it."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any


def lazy_names(package: str, exports: dict[str, str], namespace: dict[str, Any]) -> tuple[Callable, Callable]:
    """The package's `__getattr__` and `__dir__` for `exports` (name -> module holding it); a name loaded
    once is kept in the package's `namespace` (its globals)."""

    def __getattr__(name: str) -> Any:
        if name not in exports:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(exports[name]), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *exports})

    return __getattr__, __dir__
