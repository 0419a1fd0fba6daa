"""Names a package lists but loads when first used (PEP 562): importing the package stays cheap, and a
name costs its module's import only when someone asks for it. And `gc_paused`, for the large imports such a
name (or a model's load: torch) brings in."""

from __future__ import annotations

import gc
import importlib
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

_GC_LOCK = threading.Lock()
_gc_pauses = [0, False]  # [blocks open, whether the collector ran when the first began]


@contextmanager
def gc_paused() -> Iterator[None]:
    """Python's cyclic garbage collector paused for a block of imports: an import of Prefect, pandas or torch
    allocates hundreds of thousands of long-lived objects, and the collections those allocations trigger find
    nothing to free (torch's import: ~1.3 s → ~1.0 s, measured). Nested and concurrent blocks (a thread
    loading the embedder while this one imports) share one pause; the collector is enabled again, if it was,
    when the last block ends. Nothing is frozen or collected here."""
    with _GC_LOCK:
        if _gc_pauses[0] == 0:
            _gc_pauses[1] = gc.isenabled()
            gc.disable()
        _gc_pauses[0] += 1
    try:
        yield
    finally:
        with _GC_LOCK:
            _gc_pauses[0] -= 1
            if _gc_pauses[0] == 0 and _gc_pauses[1]:
                gc.enable()


def lazy_names(package: str, exports: dict[str, str], namespace: dict[str, Any]) -> tuple[Callable, Callable]:
    """The package's `__getattr__` and `__dir__` for `exports` (name -> module holding it); a name loaded
    once is kept in the package's `namespace` (its globals)."""

    def __getattr__(name: str) -> Any:
        if name not in exports:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        with gc_paused():
            value = getattr(importlib.import_module(exports[name]), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *exports})

    return __getattr__, __dir__
