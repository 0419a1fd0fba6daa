"""The installable package: the wheel ships flows, tasks, SQL and the sample inside `raglake` and runs
outside the checkout; a missing SQL file is a loud error, never an empty lake."""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tomllib
import zipfile
from pathlib import Path

import pytest

from raglake import __version__
from raglake.errors import LakeError
from raglake.lake import query
from raglake.lake.store import Lake
from tests.conftest import ROOT

PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
# what the wheel ships from the folders at the repository root, and under which name
SHIPPED = {"flows": "raglake/flows", "tasks": "raglake/tasks", "sql": "raglake/sql", "data": "raglake/sample"}
SAMPLE = ["README.md", "gate.yaml", "golden", "captures", "corpus", "targets"]
_SKIP_NAMES = {
    ".venv",
    ".git",
    "build",
    "dist",
    "__pycache__",
    ".pytest_cache",
    ".hypothesis",
    ".prefect",
    ".ruff_cache",
    ".whl",  # the wheels and the packed model a GPU run carries (benchmarks/gpu_embedding.py): not the project's
    ".gpumodel",
}


def test_every_raglake_package_is_listed_in_pyproject() -> None:
    """The package list is explicit (flows/ and tasks/ are mapped into raglake): a new folder of
    modules under raglake/ must be listed too, or the wheel silently leaves it out."""
    on_disk = {
        ".".join(p.relative_to(ROOT).parts)
        for p in (ROOT / "raglake").rglob("*")
        if p.is_dir() and p.name != "__pycache__" and any(p.glob("*.py"))
    } | {"raglake"}
    listed = set(PYPROJECT["packages"]) - {f"raglake.{SHIPPED[k].split('/')[1]}" for k in SHIPPED}
    assert on_disk == listed, f"add to [tool.setuptools] packages in pyproject.toml: {sorted(on_disk - listed)}"
    assert PYPROJECT["package-dir"] == {v.replace("/", "."): k for k, v in SHIPPED.items()}


def test_nothing_imports_flows_or_tasks_as_top_level_packages() -> None:
    """`flows.x` / `tasks.x` import in a checkout (the root is on sys.path) but not from the wheel."""
    bad = []
    for folder in ("raglake", "flows", "tasks", "deployments", "tests", "benchmarks"):
        for path in (ROOT / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                names = (
                    [a.name for a in node.names]
                    if isinstance(node, ast.Import)
                    else [node.module or ""]
                    if isinstance(node, ast.ImportFrom) and not node.level
                    else []
                )
                bad += [f"{path.relative_to(ROOT)}:{node.lineno}: {n}" for n in names if n.split(".")[0] in SHIPPED]
    assert not bad, f"import raglake.flows / raglake.tasks instead: {bad}"


def test_missing_sql_files_are_a_loud_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A broken install (no SQL files) must not connect with no views and fail later on 'unknown query'."""
    monkeypatch.setattr(query, "SQL_DIR", tmp_path)
    with pytest.raises(LakeError, match="SQL files"):
        query.connect(Lake(str(tmp_path / "lake")))
    with pytest.raises(LakeError, match="SQL files"):
        query.sql_text("breakdown")


def test_code_version_ignores_a_git_repository_around_an_installed_package(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Installed in a virtual environment inside some other git repository, raglake is not that
    repository's commit: only a checkout of raglake itself adds `+g<sha>`."""
    from raglake.pipeline import plan as runplan

    git = shutil.which("git")
    if git is None:
        pytest.skip("git is not installed")
    subprocess.run([git, "init", "-q"], cwd=tmp_path, check=True, capture_output=True)
    subprocess.run(
        [git, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "x"],
        cwd=tmp_path,
        check=True,
        capture_output=True,
    )
    site = tmp_path / ".venv" / "lib" / "site-packages"
    site.mkdir(parents=True)
    monkeypatch.setattr(runplan, "PROJECT_ROOT", site)
    assert runplan.code_version() == __version__


def _source_copy(dest: Path) -> Path:
    """The checkout as a fresh clone has it: no venv, lake, build folders or egg-info (a stale
    build/lib would leak into the wheel, and an in-tree build would race other test runs)."""

    def ignore(folder: str, names: list[str]) -> set[str]:
        rel = Path(folder).resolve().relative_to(ROOT)
        skip = {n for n in names if n in _SKIP_NAMES or n.endswith((".egg-info", ".pyc"))}
        if rel == Path("data"):
            skip.add("lake")
        if rel == Path("benchmarks"):
            skip.add("out")
        return skip & set(names)

    return Path(shutil.copytree(ROOT, dest, ignore=ignore))


def _build_wheel(tmp_path: Path) -> tuple[Path, Path]:
    pytest.importorskip("setuptools.build_meta", reason="no setuptools here: the wheel cannot be built offline")
    source = _source_copy(tmp_path / "src")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            str(source),
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "--no-cache-dir",
            "--quiet",
            "-w",
            str(tmp_path / "dist"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, f"pip wheel failed:\n{done.stdout}\n{done.stderr}"
    (wheel,) = (tmp_path / "dist").glob("raglake-*.whl")
    return wheel, source


def _shipped_files(source: Path) -> set[str]:
    """The wheel paths of the files the root folders must ship: modules, SQL and the sample."""
    found = {(folder, p) for folder in ("flows", "tasks") for p in (source / folder).glob("*.py")}
    found |= {("sql", p) for p in (source / "sql").rglob("*.sql")}
    for part in SAMPLE:
        here = source / "data" / part
        found |= {("data", p) for p in ([here] if here.is_file() else here.rglob("*")) if p.is_file()}
    return {f"{SHIPPED[folder]}/{p.relative_to(source / folder).as_posix()}" for folder, p in found}


def _check_contents(wheel: Path, source: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    top = {n.split("/", 1)[0] for n in names}
    assert top == {"raglake", f"raglake-{__version__}.dist-info"}, f"top-level entries besides raglake: {top}"
    expected = _shipped_files(source) | {"raglake/judge/prompts.lock"}  # the prompt lock travels with the prompts
    assert len(expected) > 60 and "raglake/sql/views/10_scores_latest.sql" in expected
    assert not expected - names, f"missing from the wheel: {sorted(expected - names)}"
    assert not {n for n in names if n.startswith(("raglake/sample/lake/", "raglake/sample/tools/"))}


def _fresh_venv(tmp_path: Path, wheel: Path) -> Path:
    """A virtual environment with the wheel installed (not editable) that reuses this environment's
    dependencies through a .pth file, written after the install so pip never sees the checkout's
    editable raglake (and never touches it)."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(python),
            "install",
            "--no-deps",
            "--no-index",
            "--no-cache-dir",
            "--quiet",
            str(wheel),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, f"pip install failed:\n{done.stdout}\n{done.stderr}"
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    ours = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    (Path(purelib) / "_raglake_test_deps.pth").write_text("\n".join(sorted(ours)) + "\n")
    return venv


def _in(cwd: Path, *args: str, **extra_env: str) -> str:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "RAGLAKE_LAKE", "VIRTUAL_ENV")}
    done = subprocess.run(
        [*args],
        cwd=cwd,
        env={**env, "COLUMNS": "200", **extra_env},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, f"{' '.join(args)} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
    return done.stdout


@pytest.mark.e2e
@pytest.mark.usefixtures("prefect_harness")
def test_the_wheel_runs_the_bundled_sample_outside_the_checkout(tmp_path: Path) -> None:
    from prefect.settings import get_current_settings

    wheel, source = _build_wheel(tmp_path)
    _check_contents(wheel, source)
    venv = _fresh_venv(tmp_path, wheel)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    python, raglake = str(venv / "bin" / "python"), str(venv / "bin" / "raglake")
    where = _in(
        elsewhere,
        python,
        "-c",
        "import raglake, raglake.flows.evaluate, raglake.pipeline.plan as r; "
        "print(raglake.__file__); print(r.SAMPLE_GOLDEN); print(r.SAMPLE_CAPTURES[0]); print(r.code_version())",
    )
    module, golden, captures, version = where.split()
    inside = str(venv.resolve())
    assert module.startswith(inside) and golden.startswith(inside), f"not the wheel's raglake: {where}"
    assert captures.startswith(f"replay:{inside}") and version == __version__
    assert not any(p.exists() for p in (venv / "lib").glob("python*/site-packages/flows"))

    # the run reports to the session's Prefect test server (the temporary server raglake would start is
    # Prefect's own, the same from a wheel as from the checkout: tests/test_readme_order.py starts those)
    api = str(get_current_settings().api.url)
    out = _in(
        elsewhere,
        raglake,
        "run",
        "--quiet",
        "--target",
        captures,
        "--metrics",
        "recall_any_at_k,mrr_at_k",
        PREFECT_API_URL=api,
    )
    (run_id,) = re.search(r"landed run\(s\): (\S+)", out).groups()
    assert "recall_any_at_k" in out and (elsewhere / "data" / "lake").is_dir(), out  # the default lake, here
    out = _in(elsewhere, raglake, "breakdown", "--by", "category")
    assert "breakdown by category" in out and run_id in out and "multi_hop" in out and "recall any at k" in out, out
    out = _in(elsewhere, raglake, "report", run_id, "--output", "report.html")
    html = (elsewhere / "report.html").read_text()
    assert "report.html" in out and run_id in html and "recall_any_at_k" in html


def test_the_licence_is_an_spdx_expression() -> None:
    """setuptools warns on every install that a `{text = ...}` licence table stops building after
    2027-02-18 (the warning filled `make run`'s first screen); PEP 639's SPDX string needs setuptools 77."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert isinstance(project["project"]["license"], str)
    assert re.fullmatch(r"[A-Za-z0-9.+-]+( (AND|OR|WITH) [A-Za-z0-9.+-]+)*", project["project"]["license"])
    assert "setuptools>=77" in project["build-system"]["requires"]
