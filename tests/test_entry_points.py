"""Metrics of an installed package (entry-point group `raglake.metrics`): a tiny real distribution built
from a pyproject in tmp_path and installed with pip into a folder of its own (never into the project's
virtual environment), then used from fresh interpreters that have that folder on their path. An entry
point names a module (importing it registers its metrics) or a decorated function; they load once per
process, register as `entry_point` with their package, run by default, and pass `raglake metrics --check`;
a broken one is one error naming its package."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

CHECKS = """
import raglake


@raglake.metric("acme_short", inputs=("answer",))
def acme_short(case):
    \"\"\"1 when the answer fits a text message.\"\"\"
    return len(case.answer) <= 160
"""

EXTRA = """
import re

import raglake

POLICY = re.compile(r"PN-[0-9]{4}")


@raglake.metric("acme_cites_policy", family="custom", inputs=("answer",))
def cites_policy(case):
    return bool(POLICY.search(case.answer))


def helper():
    return 1
"""


def install(tmp: Path, dist: str, files: dict[str, str], entry_points: dict[str, str]) -> Path:
    """Build `dist` 0.1 from a pyproject and pip-install it (no network, no deps) into a folder of its own."""
    src = tmp / f"{dist}-src"
    package = src / "src" / "acme_metrics"
    package.mkdir(parents=True)
    for name, text in {"__init__.py": "", **files}.items():
        (package / name).write_text(textwrap.dedent(text).lstrip(), encoding="utf-8")
    eps = "\n".join(f'{name} = "{target}"' for name, target in entry_points.items())
    (src / "pyproject.toml").write_text(
        textwrap.dedent(
            f"""
            [build-system]
            requires = ["setuptools"]
            build-backend = "setuptools.build_meta"

            [project]
            name = "{dist}"
            version = "0.1"

            [project.entry-points."raglake.metrics"]
            """
        ).lstrip()
        + eps
        + '\n\n[tool.setuptools]\npackages = ["acme_metrics"]\npackage-dir = {"" = "src"}\n'
    )
    site, scratch = tmp / f"{dist}-site", tmp / "pip-tmp"
    scratch.mkdir(exist_ok=True)
    done = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "--no-build-isolation", "--no-index", "--no-cache-dir"]
        + ["--quiet", "--target", str(site), str(src)],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "TMPDIR": str(scratch), "PIP_DISABLE_PIP_VERSION_CHECK": "1"},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return site


def python(site: Path, code: str, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """A fresh interpreter with the installed package's folder on its path."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")]).rstrip(":")}
    return subprocess.run(
        [sys.executable, *(["-c", code] if code else []), *args],
        capture_output=True,
        text=True,
        timeout=300,
        env={**env, "COLUMNS": "250"},
        cwd=cwd,
    )


@pytest.fixture(scope="module")
def acme(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("entry_points")
    return install(
        tmp,
        "acme-metrics",
        {"checks.py": CHECKS, "extra.py": EXTRA},
        {"acme": "acme_metrics.checks", "acme_policy": "acme_metrics.extra:cites_policy"},
    )


LOADED = """
import shutil, sys
from raglake.metrics.plugins import load_entry_points
from raglake.metrics.registry import default_metrics, get_metric

names = load_entry_points()
print(names)
for name in names:
    m = get_metric(name)
    print(name, m.origin, m.source, m.version.split("+")[0])
shutil.rmtree(sys.argv[1])  # the package is gone: a second call loads nothing again, it answers what it loaded
print(load_entry_points() == names)
print(sorted(set(names) & {m.name for m in default_metrics()}))
"""


def test_an_installed_packages_metrics_load_once_as_entry_points_and_run_by_default(acme, tmp_path):
    import shutil

    site = tmp_path / "site"
    shutil.copytree(acme, site)
    [dist_info] = site.glob("acme_metrics-0.1.dist-info")
    done = python(site, LOADED, str(dist_info))
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "['acme_short', 'acme_cites_policy']"  # entry points by name: acme, acme_policy
    assert lines[1] == "acme_short entry_point checks.py:4 (acme-metrics 0.1) 1"
    assert lines[2] == "acme_cites_policy entry_point extra.py:8 (acme-metrics 0.1) 1"
    assert lines[3:] == ["True", "['acme_cites_policy', 'acme_short']"]


def test_metrics_check_and_the_listing_cover_an_installed_packages_metrics(acme, tmp_path):
    done = python(acme, "", "-m", "raglake", "metrics", "--check", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert [line.split()[:3] for line in done.stdout.splitlines()] == [
        ["ok", "acme_short", "entry_point"],
        ["ok", "acme_cites_policy", "entry_point"],
    ]
    listing = python(acme, "", "-m", "raglake", "metrics", cwd=tmp_path)
    assert listing.returncode == 0, listing.stderr
    assert "acme_short" in listing.stdout and "acme-metrics 0.1" in listing.stdout
    markdown = python(acme, "", "-m", "raglake", "metrics", "--markdown", cwd=tmp_path)
    assert "acme_short" not in markdown.stdout  # raglake's docs table: built-in metrics only


FAILING = """
from raglake.errors import ConfigError
from raglake.metrics.plugins import load_entry_points
from raglake.metrics.registry import all_metrics

for attempt in (1, 2):  # a broken entry point is not taken as loaded: the next call says it again
    try:
        load_entry_points()
    except ConfigError as e:
        print(e)
print(sorted(m.name for m in all_metrics() if not m.builtin))
"""


@pytest.mark.parametrize(
    ("files", "entry_points", "words"),
    [
        (
            {"checks.py": CHECKS + "\nTHRESHOLD = int('sixty')\n"},
            {"acme": "acme_metrics.checks"},
            "entry point acme = acme_metrics.checks of package broken-metrics 0.1 (group raglake.metrics) failed "
            "to load: acme_metrics/checks.py:9 (THRESHOLD = int('sixty')): ValueError: invalid literal for int() "
            "with base 10: 'sixty'",
        ),
        (
            {"extra.py": EXTRA},
            {"acme": "acme_metrics.extra:helper"},
            "entry point acme = acme_metrics.extra:helper of package broken-metrics 0.1 (group raglake.metrics) "
            "names <function helper at",
        ),
        (
            {"checks.py": CHECKS},
            {"acme": "acme_metrics.gone"},
            "of package broken-metrics 0.1 (group raglake.metrics) failed to load: ModuleNotFoundError: No module "
            "named 'acme_metrics.gone'",
        ),
    ],
)
def test_a_broken_entry_point_is_one_error_naming_its_package(tmp_path, files, entry_points, words):
    site = install(tmp_path, "broken-metrics", files, entry_points)
    done = python(site, FAILING)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 3 and lines[0] == lines[1], lines
    assert words in lines[0], lines[0]
    assert lines[2] == "[]"  # nothing of a module that failed halfway stays registered
