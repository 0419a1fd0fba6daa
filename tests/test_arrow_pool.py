"""The command line's Arrow allocations come from jemalloc (issue 29's 1M memory): Arrow's default pool,
mimalloc, kept ~230 MiB more at the peak of a 200k-case run (962 against 733 MiB, measured). A pool the user
chose (ARROW_DEFAULT_MEMORY_POOL) is kept; a process of the user's own (the Python API) is left alone."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pyarrow as pa
import pytest

SHOW = """
import json, os, sys
import pyarrow as pa
from raglake.cli import main
sys.argv = ["raglake", "metrics"]
try:
    main()
except SystemExit:
    pass
print(json.dumps([pa.default_memory_pool().backend_name, os.environ.get("ARROW_DEFAULT_MEMORY_POOL")]), file=sys.stderr)
"""


def _pools(env: dict[str, str]) -> list[str | None]:
    done = subprocess.run([sys.executable, "-c", SHOW], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stderr.strip().splitlines()[-1])


@pytest.mark.skipif(not hasattr(pa, "jemalloc_memory_pool"), reason="pyarrow without jemalloc")
def test_the_command_line_allocates_from_jemalloc_and_its_children_too() -> None:
    try:
        pa.jemalloc_memory_pool()
    except NotImplementedError:
        pytest.skip("this pyarrow is built without jemalloc")
    env = {k: v for k, v in os.environ.items() if k != "ARROW_DEFAULT_MEMORY_POOL"}
    assert _pools(env) == ["jemalloc", "jemalloc"]  # this process, and what its children inherit


def test_a_pool_the_user_chose_is_kept() -> None:
    assert _pools({**os.environ, "ARROW_DEFAULT_MEMORY_POOL": "system"}) == ["system", "system"]


def test_the_python_api_leaves_the_callers_pool_alone() -> None:
    env = {k: v for k, v in os.environ.items() if k != "ARROW_DEFAULT_MEMORY_POOL"}

    def pool(code: str) -> str:
        done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr[-2000:]
        return done.stdout.strip()

    show = "print(pa.default_memory_pool().backend_name)"
    assert pool(f"import pyarrow as pa, raglake; raglake.evaluate; {show}") == pool(f"import pyarrow as pa; {show}")
