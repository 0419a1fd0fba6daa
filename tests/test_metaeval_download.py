"""Issue 27, finding 7: from a pip install (no ../shared/metaeval beside the package) `raglake metaeval`
ended in a 24-line Prefect traceback and then `error: no labelled data at .../lib/python3.11/shared/metaeval`.
Now it says, in one error and before Prefect starts, what to pass; and `raglake metaeval --download` fetches
the public sets' files by pinned commit, checks each one's sha256 before writing it (atomically), and
keeps nothing of a file that does not match. Tested against a local HTTP server (`--mirror`) that serves
the same files, then a tampered copy."""

from __future__ import annotations

import hashlib
import http.server
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from raglake.errors import ConfigError
from raglake.metaeval.download import PINNED, download
from raglake.metaeval.plan import DEFAULT_SOURCE, MetaevalSettings, check_data
from raglake.metaeval.sources import SOURCES, convert
from tests.conftest import ROOT
from tests.httpkit import free_port

needs_shared = pytest.mark.skipif(not DEFAULT_SOURCE.is_dir(), reason="../shared/metaeval is not beside the checkout")


class Mirror:
    """A folder served over HTTP on a loopback port (a thread), with the paths it was asked for."""

    def __init__(self, folder: Path):
        asked = self.asked = []

        class Handler(http.server.SimpleHTTPRequestHandler):
            def __init__(self, *args, **kwargs):  # noqa: ANN002, ANN003
                super().__init__(*args, directory=str(folder), **kwargs)

            def do_GET(self) -> None:  # noqa: N802
                asked.append(self.path)
                super().do_GET()

            def log_message(self, *args) -> None:  # noqa: ANN002
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(5)


def _copy(dest: Path) -> Path:
    """The pinned files of ../shared/metaeval, and nothing else, in their layout."""
    for f in PINNED:
        (dest / f.path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(DEFAULT_SOURCE / f.path, dest / f.path)
    return dest


@pytest.fixture(scope="module")
def good(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Mirror]:
    mirror = Mirror(_copy(tmp_path_factory.mktemp("mirror")))
    yield mirror
    mirror.stop()


@pytest.fixture()
def tampered(tmp_path: Path) -> Iterator[tuple[Mirror, str]]:
    """A copy in which one file (the 7th of 8) has one byte changed: same size, another digest."""
    folder = _copy(tmp_path / "tampered")
    bad = PINNED[6].path
    data = bytearray((folder / bad).read_bytes())
    data[1000] = ord("X") if data[1000] != ord("X") else ord("Y")
    (folder / bad).write_bytes(bytes(data))
    mirror = Mirror(folder)
    yield mirror, bad
    mirror.stop()


def _files(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if not p.is_dir())


def test_the_pins_cover_every_file_the_converters_read_and_match_the_shared_copies() -> None:
    assert len({f.path for f in PINNED}) == len(PINNED)
    assert {d for f in PINNED for d in f.datasets} == set(SOURCES)
    for f in PINNED:
        assert f.url.startswith("https://raw.githubusercontent.com/") and len(f.commit) == 40, f.path
        if DEFAULT_SOURCE.is_dir():
            data = (DEFAULT_SOURCE / f.path).read_bytes()
            assert (len(data), hashlib.sha256(data).hexdigest()) == (f.size, f.sha256), f.path


@needs_shared
def test_download_from_a_mirror_gives_the_same_files_and_every_set_converts(good: Mirror, tmp_path: Path) -> None:
    said: list[str] = []
    folder = download(tmp_path / "sets", mirror=good.url, say=said.append)
    assert _files(folder) == sorted(f.path for f in PINNED)  # nothing else: no temporary file left
    for f in PINNED:
        assert (folder / f.path).read_bytes() == (DEFAULT_SOURCE / f.path).read_bytes()
    sets = convert(folder)  # only the downloaded files: the pins are what the converters read
    assert set(sets) == set(SOURCES) and all(sets.values())
    assert len(said) == len(PINNED) and all("sha256 as pinned" in s for s in said)
    good.asked.clear()  # again: every file is there with its digest, nothing is fetched
    download(folder, mirror=good.url, say=said.append)
    assert good.asked == [] and said[-1].endswith("already there (sha256 as pinned)")


@needs_shared
def test_a_tampered_file_is_a_clear_error_and_nothing_of_it_is_kept(tampered, good: Mirror, tmp_path: Path) -> None:
    mirror, bad = tampered
    folder = tmp_path / "sets"
    with pytest.raises(ConfigError) as e:
        download(folder, mirror=mirror.url)
    message = str(e.value)
    assert f"{bad} from {mirror.url}/{bad} has sha256" in message and "not the pinned" in message
    assert "nothing of it was written" in message and "\n" not in message
    before = [f.path for f in PINNED[:6]]
    assert _files(folder) == sorted(before)  # the checked files before it, whole; no part of it, no temp file
    download(folder, mirror=good.url)  # the good copy completes the folder
    assert _files(folder) == sorted(f.path for f in PINNED)


@needs_shared
def test_a_file_already_there_with_another_digest_is_replaced_only_by_a_matching_one(good: Mirror, tmp_path) -> None:
    folder = tmp_path / "sets"
    target = folder / PINNED[0].path
    target.parent.mkdir(parents=True)
    target.write_text("stale\n")
    download(folder, mirror=good.url, datasets=["stsb"])
    assert hashlib.sha256(target.read_bytes()).hexdigest() == PINNED[0].sha256
    assert _files(folder) == [PINNED[0].path]  # --datasets: only what they read


def test_offline_the_download_is_one_clear_error(tmp_path: Path) -> None:
    closed = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    with pytest.raises(ConfigError, match=r"cannot download stsb/stsb-en-dev\.csv from .*ConnectError") as e:
        download(tmp_path / "sets", mirror=closed, datasets=["stsb"])
    assert "--mirror" in str(e.value)
    assert not (tmp_path / "sets").exists() or _files(tmp_path / "sets") == []
    with pytest.raises(ConfigError, match="http:// or https://"):
        download(tmp_path / "sets", mirror="ftp://example.org/sets")


@needs_shared
def test_the_command_downloads_then_measures_from_the_folder(good: Mirror, tmp_path: Path) -> None:
    from raglake.cli import app

    folder = tmp_path / "sets"
    got = CliRunner().invoke(app, ["metaeval", "--download", "--mirror", good.url, "--source", str(folder)])
    assert got.exit_code == 0, got.output
    assert f"measure with: raglake metaeval --source {folder}" in " ".join(got.output.split())
    check_data(MetaevalSettings(source=str(folder)))  # complete: no error
    out = tmp_path / "export"
    exported = CliRunner().invoke(
        app, ["metaeval", "--source", str(folder), "--datasets", "wice", "--export", str(out)]
    )
    assert exported.exit_code == 0, exported.output and (out / "wice.jsonl").is_file()
    refused = CliRunner().invoke(app, ["metaeval", "--mirror", good.url])
    assert refused.exit_code != 0 and "--mirror goes with --download" in str(refused.exception)


def test_the_default_folder_is_the_user_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from raglake.metaeval import download as d
    from raglake.metaeval import plan

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    assert d.cache_folder() == tmp_path / "cache" / "raglake" / "metaeval"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert d.cache_folder() == Path.home() / ".cache" / "raglake" / "metaeval"
    monkeypatch.setattr(plan, "DEFAULT_SOURCE", tmp_path / "no-checkout")
    assert plan.source_root(None) == d.cache_folder()  # no checkout beside the package: the download's folder
    assert plan.source_root(str(tmp_path)) == tmp_path


INSTALLED = """
import sys
from pathlib import Path
import raglake.metaeval.plan as plan
plan.DEFAULT_SOURCE = Path(sys.argv[1]) / "lib" / "python3.11" / "shared" / "metaeval"  # as a wheel has it
sys.argv = ["raglake", "metaeval", "--lake", sys.argv[2]]
from raglake.cli import main
try:
    main()
finally:
    print("prefect imported:", "prefect" in sys.modules, file=sys.stderr)
"""


def test_without_data_a_wheel_says_what_to_pass_in_one_error_before_prefect_starts(tmp_path: Path) -> None:
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache"), "COLUMNS": "400"}
    env.pop("PREFECT_API_URL", None)  # nothing may need a server
    done = subprocess.run(
        [sys.executable, "-c", INSTALLED, str(tmp_path / "venv"), str(tmp_path / "lake")],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stdout + done.stderr
    assert "prefect imported: False" in done.stderr
    (line,) = done.stdout.strip().splitlines()  # one line
    cache = tmp_path / "cache" / "raglake" / "metaeval"
    assert line == (
        f"error: no labelled data at {cache}: run `raglake metaeval --download` (the public sets, checked by "
        "sha256), or give --data FILE.jsonl or --source DIR (docs/metaeval.md)"
    )
    assert not (tmp_path / "lake").exists()
    assert str(ROOT) not in line  # never a path inside a checkout the user does not have
