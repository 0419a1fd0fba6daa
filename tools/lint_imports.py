"""Run import-linter's contracts (pyproject.toml) over raglake as the wheel lays it out.

The repository keeps flows/ and tasks/ at its root and the wheel ships them as raglake.flows and
raglake.tasks (a setuptools package-dir mapping). An editable install resolves those names through
setuptools' import hook, which grimp (import-linter's graph builder) cannot see, so this builds the
wheel's layout as a folder of symlinks and lints that. Exit status: lint-imports' own.

    python tools/lint_imports.py            # what `make test` runs
    python tools/lint_imports.py --plant "raglake/lake/store.py:from raglake.metrics import registry"
        # lint with one extra import line appended to a module (proves a contract bites)
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MAPPED = {"flows": ROOT / "flows", "tasks": ROOT / "tasks"}  # raglake.<name> -> repository folder


def wheel_layout(into: Path) -> Path:
    """`into`/raglake: every entry of raglake/ plus the mapped folders, as symlinks."""
    package = into / "raglake"
    package.mkdir()
    for entry in (ROOT / "raglake").iterdir():
        if entry.name != "__pycache__":
            (package / entry.name).symlink_to(entry)
    for name, folder in MAPPED.items():
        (package / name).symlink_to(folder)
    return package


def plant(package: Path, spec: str) -> None:
    """Replace the symlink of one module by a copy with `line` appended."""
    rel, line = spec.split(":", 1)
    parts = Path(rel).parts
    if parts[0] in MAPPED:
        parts = ("raglake", *parts)
    target = package.parent.joinpath(*parts)
    folder = target.parent
    while folder.is_symlink() is False and folder != package:  # copy symlinked parents into real folders
        folder = folder.parent
    if folder.is_symlink():
        real = folder.resolve()
        folder.unlink()
        shutil.copytree(real, folder, ignore=shutil.ignore_patterns("__pycache__"))
    text = target.read_text()
    target.unlink()
    target.write_text(text + "\n" + line + "\n")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--plant", action="append", default=[], help="PATH:IMPORT LINE to add before linting")
    args = parser.parse_args()
    lint = Path(sys.executable).with_name("lint-imports")
    with tempfile.TemporaryDirectory(prefix="raglake-layers-") as tmp:
        package = wheel_layout(Path(tmp))
        for spec in args.plant:
            plant(package, spec)
        env = {**os.environ, "PYTHONPATH": tmp}
        return subprocess.call([str(lint), "--config", str(ROOT / "pyproject.toml"), "--no-cache"], cwd=tmp, env=env)


if __name__ == "__main__":
    sys.exit(main())
