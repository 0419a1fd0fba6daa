"""What a fresh interpreter that raglake starts (`python -m raglake....`: the golden set's validation, the
embedder's model process) is given, so that it runs the very code of the process that started it."""

from __future__ import annotations

import os
import site
from pathlib import Path


def child_env() -> dict[str, str]:
    """This environment; where raglake was imported from a folder that is not a site-packages (a
    checkout put on sys.path by a script), that folder goes first on the path, so that the other process
    runs the same code."""
    env = dict(os.environ)
    here = Path(__file__).resolve().parents[1]  # the folder holding the package raglake
    if here not in {Path(p).resolve() for p in site.getsitepackages()}:
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(here), env.get("PYTHONPATH")) if p)
    return env
