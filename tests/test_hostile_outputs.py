"""Hostile conditions for what raglake writes and how runs are named (issue 25): a user-named output is
written only where asked (never through a link, never onto a device, a FIFO or a folder, never a partial
file), run ids and names are never selectors or paths, and bad inputs give one clear line."""

from __future__ import annotations

import errno
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

import raglake
import raglake.api.evaluation
from raglake import outputs
from raglake.analysis import resolve_run
from raglake.api.inputs import stage_rows
from raglake.errors import ConfigError, InputError, LakeError, UnknownNameError
from raglake.metaeval.items import read_items, write_items
from raglake.pipeline.lakes import open_lake
from raglake.pipeline.settings import RunSettings, build
from tests.conftest import FIXTURES, ROOT
from tests.lakekit import land

GOLDEN, CAPTURES = str(FIXTURES / "mini_golden.jsonl"), f"replay:{FIXTURES / 'mini_captures.jsonl'}"
ROWS = [{"question": "q1", "answer": "a", "contexts": ["c"]}, {"question": "q2", "answer": "b", "contexts": ["d"]}]


@pytest.fixture(scope="module")
def lake(tmp_path_factory) -> str:
    """Two runs: `latest0` (a run id that starts like a selector), then a newer one, `r-new`."""
    folder = str(tmp_path_factory.mktemp("hostile-outputs") / "lake")
    land(folder, GOLDEN, CAPTURES, "latest0", minutes=0)
    land(folder, GOLDEN, CAPTURES, "r-new", minutes=5)
    return folder


@pytest.fixture(autouse=True)
def _own_working_folder(tmp_path_factory, monkeypatch) -> None:
    """Each test runs in an empty folder of its own: a report that went to a file named `-` (before the
    fix) or to the default report-<run>.html lands there, not in the checkout."""
    monkeypatch.chdir(tmp_path_factory.mktemp("cwd"))


def _main(monkeypatch, capsys, *args: str) -> tuple[int, str, str]:
    """`raglake ARGS` in this process: exit code, stdout and stderr."""
    from raglake.cli import main

    monkeypatch.setattr(sys, "argv", ["raglake", *args])
    with pytest.raises(SystemExit) as exited:
        main()
    out, err = capsys.readouterr()
    return exited.value.code or 0, out, err


def _one_line_error(code: int, out: str, err: str, *words: str) -> str:
    text = " ".join((out + err).split())
    assert code == 2 and text.startswith("error:") and "Traceback" not in out + err, (code, out, err)
    for word in words:
        assert word in text, (word, text)
    return text


def _leftovers(folder: Path, *keep: str) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name not in keep)


# ---- probe 1: report -o writes only where asked -------------------------------------------------------


def _device(tmp_path: Path) -> str:
    """A character device to aim at: a copy of /dev/full's under tmp_path where this user may make one (as
    root: a regression must not replace the machine's own /dev/full, as the probe did), else /dev/full
    itself (a user who cannot make a device cannot rename over /dev either)."""
    path = tmp_path / "full"
    try:
        os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(1, 7))
    except PermissionError:
        return "/dev/full"
    return str(path)


def test_report_refuses_a_device_and_leaves_it_a_device(lake, tmp_path, monkeypatch, capsys) -> None:
    device = _device(tmp_path)
    code, out, err = _main(monkeypatch, capsys, "report", "latest", "-o", device, "--lake", lake)
    _one_line_error(code, out, err, device, "character device", "-o -")
    assert stat.S_ISCHR(os.lstat(device).st_mode)


def test_report_refuses_a_fifo_and_a_folder(lake, tmp_path, monkeypatch, capsys) -> None:
    fifo = tmp_path / "pipe.html"
    os.mkfifo(fifo)
    code, out, err = _main(monkeypatch, capsys, "report", "latest", "-o", str(fifo), "--lake", lake)
    _one_line_error(code, out, err, str(fifo), "FIFO")
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    code, out, err = _main(monkeypatch, capsys, "report", "latest", "-o", str(tmp_path), "--lake", lake)
    _one_line_error(code, out, err, "it is a folder")


def test_report_never_follows_a_symlink_at_the_target(lake, tmp_path, monkeypatch, capsys) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    link = tmp_path / "r.html"
    link.symlink_to(victim)
    code, out, err = _main(monkeypatch, capsys, "report", "latest", "-o", str(link), "--lake", lake)
    _one_line_error(code, out, err, str(link), "symbolic link")
    assert victim.read_text() == "precious\n" and link.is_symlink()
    dangling = tmp_path / "d.html"
    dangling.symlink_to(tmp_path / "created-through-the-link.html")
    code, out, err = _main(monkeypatch, capsys, "report", "latest", "-o", str(dangling), "--lake", lake)
    _one_line_error(code, out, err, "symbolic link")
    assert not (tmp_path / "created-through-the-link.html").exists()


def test_a_symlink_at_the_old_temp_name_is_not_followed(lake, tmp_path, monkeypatch, capsys) -> None:
    """The report went through `.r.html.tmp` beside the target: a link planted there was written through."""
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    (tmp_path / ".r.html.tmp").symlink_to(victim)
    code, out, _ = _main(monkeypatch, capsys, "report", "latest", "-o", str(tmp_path / "r.html"), "--lake", lake)
    assert code == 0, out
    assert victim.read_text() == "precious\n"
    assert (tmp_path / "r.html").read_text().startswith("<!DOCTYPE html>")
    assert _leftovers(tmp_path, "victim.txt", ".r.html.tmp", "r.html") == []


def test_the_temp_file_is_exclusive_in_a_private_folder(tmp_path, monkeypatch) -> None:
    """What the rename publishes is made with O_CREAT|O_EXCL|O_NOFOLLOW inside a fresh 0700 folder
    (mkdtemp: an unpredictable name, created exclusively) beside the target, removed afterwards."""
    opened: list[tuple[str, int, int]] = []
    real_open = os.open

    def spy(path, flags, mode=0o777, *, dir_fd=None):
        path = os.fspath(path)
        if Path(path).parent != tmp_path and Path(path).parent.parent == tmp_path:
            opened.append((path, flags, stat.S_IMODE(os.stat(Path(path).parent).st_mode)))
        return real_open(path, flags, mode, dir_fd=dir_fd)

    monkeypatch.setattr(os, "open", spy)
    target = tmp_path / "out.html"
    outputs.write_text(target, "<p>hi</p>\n", "the report")
    assert target.read_text() == "<p>hi</p>\n" and stat.S_ISREG(os.lstat(target).st_mode)
    ((path, flags, folder_mode),) = opened
    assert flags & os.O_CREAT and flags & os.O_EXCL and flags & os.O_NOFOLLOW, flags
    assert folder_mode == 0o700 and Path(path).parent.name != ".out.html.tmp"
    assert _leftovers(tmp_path, "out.html") == []


def test_a_link_planted_at_the_target_while_writing_is_refused(tmp_path) -> None:
    """The target is checked again just before the rename: a link planted meanwhile is neither followed
    nor replaced, and no temp file is left."""
    victim, target = tmp_path / "victim.txt", tmp_path / "out.html"
    victim.write_text("precious\n")
    with pytest.raises(ConfigError, match="symbolic link"):
        with outputs.writing(target, "the report") as f:
            f.write("<p>hi</p>\n")
            target.symlink_to(victim)
    assert victim.read_text() == "precious\n" and target.is_symlink()
    assert _leftovers(tmp_path, "victim.txt", "out.html") == []


def test_an_existing_report_keeps_its_mode_and_is_replaced_whole(tmp_path) -> None:
    target = tmp_path / "out.html"
    target.write_text("old\n")
    target.chmod(0o640)
    outputs.write_text(target, "new\n", "the report")
    assert target.read_text() == "new\n" and stat.S_IMODE(target.stat().st_mode) == 0o640


@pytest.mark.parametrize("code, words", [(errno.ENOSPC, "No space left on device"), (errno.EROFS, "Read-only")])
def test_a_full_disk_or_read_only_folder_is_one_line_and_leaves_nothing(
    lake, tmp_path, monkeypatch, capsys, code, words
) -> None:
    """A write that fails half-way (ENOSPC) or at once (EROFS): one line, no traceback, the target as it
    was (absent, or its old content), no temp file or folder left."""
    real = outputs._write_all

    def failing(fd: int, data: bytes) -> None:
        if code == errno.ENOSPC:
            real(fd, data[: len(data) // 2])
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr(outputs, "_write_all", failing)
    target = tmp_path / "r.html"
    result = _main(monkeypatch, capsys, "report", "latest", "-o", str(target), "--lake", lake)
    _one_line_error(*result, str(target), words)
    assert _leftovers(tmp_path) == []
    target.write_text("old report\n")
    result = _main(monkeypatch, capsys, "report", "latest", "-o", str(target), "--lake", lake)
    _one_line_error(*result, words)
    assert target.read_text() == "old report\n" and _leftovers(tmp_path, "r.html") == []


def test_a_read_only_filesystem_at_the_temp_folder_is_one_line(lake, tmp_path, monkeypatch, capsys) -> None:
    def read_only(*args, **kwargs):
        raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(tmp_path))

    monkeypatch.setattr(outputs.tempfile, "mkdtemp", read_only)
    result = _main(monkeypatch, capsys, "report", "latest", "-o", str(tmp_path / "r.html"), "--lake", lake)
    _one_line_error(*result, "Read-only file system")
    assert _leftovers(tmp_path) == []


def test_report_to_stdout(lake, monkeypatch, capsys) -> None:
    code, out, _ = _main(monkeypatch, capsys, "report", "latest", "-o", "-", "--lake", lake)
    assert code == 0 and out.startswith("<!DOCTYPE html>") and out.rstrip().endswith("</html>"), out[-300:]


def test_the_default_report_name_is_a_file_name_in_the_working_folder() -> None:
    from raglake.cli.report import _file_safe

    assert _file_safe("r-20260101-000000-basic_search-abc123") == "r-20260101-000000-basic_search-abc123"
    assert _file_safe("v1.2") == "v1.2"
    for foreign in ("../../etc/passwd", "/abs/x", "a\nb\x00c"):  # a run id a foreign lake's runs file may hold
        assert "/" not in _file_safe(foreign) and "\n" not in _file_safe(foreign) and "\x00" not in _file_safe(foreign)


def test_report_to_a_full_standard_output_is_one_line_on_stderr(lake, tmp_path) -> None:
    """`raglake report latest -o - > /dev/full`: the error cannot go where errors go (stdout), so stderr."""
    with open(_device(tmp_path), "w") as full:
        done = subprocess.run(
            [sys.executable, "-m", "raglake", "report", "latest", "-o", "-", "--lake", lake],
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            timeout=300,
        )
    assert done.returncode == 2, done.stderr[-3000:]
    assert done.stderr == "error: cannot write the report to standard output: No space left on device\n"


def test_report_folder_must_exist(lake, tmp_path, monkeypatch, capsys) -> None:
    result = _main(monkeypatch, capsys, "report", "latest", "-o", str(tmp_path / "no" / "r.html"), "--lake", lake)
    _one_line_error(*result, "does not exist")


def test_import_writes_through_the_same_writer(tmp_path, monkeypatch, capsys) -> None:
    """`raglake import --out-dir`: a link planted at an output name is refused, its target untouched."""
    source = tmp_path / "ragas.jsonl"
    source.write_text('{"user_input": "q", "response": "a", "retrieved_contexts": ["c"]}\n')
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    (out_dir / "ragas.golden.jsonl").symlink_to(victim)
    result = _main(monkeypatch, capsys, "import", str(source), "--out-dir", str(out_dir))
    _one_line_error(*result, "ragas.golden.jsonl", "symbolic link")
    assert victim.read_text() == "precious\n"
    (out_dir / "ragas.golden.jsonl").unlink()
    code, out, _ = _main(monkeypatch, capsys, "import", str(source), "--out-dir", str(out_dir))
    assert code == 0 and (out_dir / "ragas.golden.jsonl").read_text().count("\n") == 1, out


def test_metaeval_export_writes_through_the_same_writer(tmp_path) -> None:
    items = read_items(FIXTURES / "metaeval_tiny.jsonl")
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    (tmp_path / "set.jsonl").symlink_to(victim)
    with pytest.raises(ConfigError, match="symbolic link"):
        write_items(tmp_path / "set.jsonl", items)
    assert victim.read_text() == "precious\n"


# ---- probe 2: run ids are never selectors, selectors are exactly latest and latest~N ------------------


def test_latest0_is_a_run_id_not_a_selector(lake) -> None:
    con = open_lake(lake).con
    assert resolve_run(con, "latest0") == "latest0"
    assert resolve_run(con, "latest") == "r-new"
    assert resolve_run(con, "latest~1") == "latest0"
    assert resolve_run(con, "latest~01") == "latest0"
    for spec in ("latest~", "latest~-1", "latest~x", "latestx", "latest 1"):
        with pytest.raises(UnknownNameError):
            resolve_run(con, spec)
    with pytest.raises(ConfigError, match="holds 2 run"):
        resolve_run(con, "latest~2")


def test_breakdown_report_and_gate_use_the_run_named_latest0(lake, tmp_path, monkeypatch, capsys) -> None:
    code, out, _ = _main(monkeypatch, capsys, "breakdown", "-r", "latest0", "--by", "all", "--lake", lake)
    assert code == 0 and "runs latest0" in " ".join(out.split()) and "r-new" not in out, out
    code, out, _ = _main(monkeypatch, capsys, "report", "latest0", "-o", "-", "--lake", lake)
    assert code == 0 and "· latest0</title>" in out, out[:600]
    gate = ("gate", "--candidate", "latest0", "--rules", str(ROOT / "data" / "gate.yaml"), "--allow-missing-baseline")
    code, out, _ = _main(monkeypatch, capsys, *gate, "--lake", lake)
    text = " ".join(out.split())
    assert code == 0 and "latest0 is the first committed run" in text and "r-new" not in text, text


@pytest.mark.parametrize("run_id", ["latest", "Latest"])
def test_a_run_id_that_is_a_selector_is_refused(run_id) -> None:
    if run_id == "Latest":  # not a selector: selectors are case-sensitive
        assert RunSettings(run_id=run_id).run_id == run_id
        return
    with pytest.raises(ConfigError, match="selector"):
        build(RunSettings, run_id=run_id)


@pytest.mark.parametrize(
    "run_id", ["/", "..", "a/b", "../x", "a\x00b", "a\nb", "a\n", "a\tb", "-a", ".a", "a b", "latest~3"]
)
def test_a_run_id_is_never_a_path(run_id) -> None:
    with pytest.raises(ConfigError, match="must start with a letter"):
        build(RunSettings, run_id=run_id)


def test_a_long_run_id_is_refused_for_its_length() -> None:
    assert RunSettings(run_id="r" * 128).run_id == "r" * 128
    with pytest.raises(ConfigError, match="129 characters long; the limit is 128") as caught:
        build(RunSettings, run_id="r" * 129)
    assert "must start with a letter" not in str(caught.value)


def test_a_metaeval_id_follows_the_same_rule() -> None:
    from raglake.metaeval.plan import MetaevalSettings

    with pytest.raises(ConfigError, match="selector"):  # `raglake metaeval --show latest` selects the newest
        build(MetaevalSettings, metaeval_id="latest")
    with pytest.raises(ConfigError, match="129 characters long; the limit is 128"):
        build(MetaevalSettings, metaeval_id="m" * 129)


# ---- probe 3: the API's name= is never a path ------------------------------------------------------


@pytest.mark.parametrize("name", ["../..", "a/b", "/abs/golden", "..", "", "a\x00b"])
def test_api_name_is_never_a_path(name, tmp_path) -> None:
    with pytest.raises(ConfigError, match="letters, digits"):
        stage_rows(ROWS, name)


def test_api_name_outside_its_folder_writes_nothing(tmp_path) -> None:
    (tmp_path / "x").mkdir()
    with pytest.raises(ConfigError, match="name"):
        raglake.evaluate(ROWS, name=str(tmp_path / "x" / "golden"), lake=str(tmp_path / "lake"))
    assert _leftovers(tmp_path / "x") == [] and not (tmp_path / "lake").exists()


def test_api_long_name_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="300 characters long; the limit is 128"):
        raglake.evaluate(ROWS, name="x" * 300)


# ---- probe 4: the API's errors are messages ----------------------------------------------------------


@pytest.mark.parametrize("contexts, kind", [(["c", 3], "int"), ([{"text": "c"}], "dict"), (7, "int")])
def test_api_contexts_holding_a_non_string_names_row_and_field(contexts, kind) -> None:
    rows = [
        {"question": "q1", "answer": "a", "contexts": ["c"]},
        {"question": "q", "answer": "a", "contexts": contexts},
    ]
    with pytest.raises(InputError) as caught:
        raglake.evaluate(rows)
    e = caught.value
    assert e.path == "row 2 of the data" and e.field == "contexts" and kind in e.message, str(e)


@pytest.mark.parametrize("where", ["file", "devnull"])
def test_api_bad_lake_is_a_raglake_error(tmp_path, where) -> None:
    lake = "/dev/null" if where == "devnull" else tmp_path / "a-file"
    if where == "file":
        lake.write_text("not a lake\n")
    with pytest.raises(LakeError, match=str(lake)):
        raglake.evaluate(ROWS, lake=str(lake))
    with pytest.raises(LakeError, match=str(lake)):
        raglake.open_lake(str(lake)).runs()


def test_api_read_only_lake_is_a_lake_error_before_any_work(tmp_path, monkeypatch) -> None:
    """A read-only lake folder (simulated: the tests may run as root, whom a mode 0555 does not stop)."""
    folder = tmp_path / "lake"
    folder.mkdir()
    real = os.access
    monkeypatch.setattr(os, "access", lambda p, mode, **kw: False if Path(p) == folder else real(p, mode, **kw))

    def flow(*args, **kwargs):
        raise AssertionError("the run started: the read-only lake was found only when landing")

    monkeypatch.setattr(raglake.api.evaluation, "_run", flow)
    with pytest.raises(LakeError, match=f"{folder} cannot be written"):
        raglake.evaluate(ROWS, lake=str(folder))
    assert list(folder.iterdir()) == []


# ---- probe 6: a missing lake is named, not "(no rows)" ----------------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        ("runs",),
        ("trend",),
        ("breakdown",),
        ("compare", "latest~1", "latest"),
        ("report", "latest"),
        ("health",),
        ("coverage",),
    ],
)
def test_read_commands_on_a_missing_lake_say_so(args, tmp_path, monkeypatch, capsys) -> None:
    missing = str(tmp_path / "no" / "such" / "folder")
    result = _main(monkeypatch, capsys, *args, "--lake", missing)
    _one_line_error(*result, f"no lake at {missing}", "raglake run")
    assert not (tmp_path / "no").exists()


def test_api_reads_of_a_missing_lake_say_so(tmp_path) -> None:
    missing = str(tmp_path / "nowhere")
    with pytest.raises(LakeError, match=f"no lake at {missing}"):
        raglake.open_lake(missing).runs()
    with pytest.raises(LakeError, match=f"no lake at {missing}"):
        raglake.open_lake(missing).breakdown()


def test_an_empty_lake_still_says_it_has_no_runs(tmp_path, monkeypatch, capsys) -> None:
    (tmp_path / "lake" / "runs").mkdir(parents=True)
    code, out, err = _main(monkeypatch, capsys, "runs", "--lake", str(tmp_path / "lake"))
    assert code == 0 and "no lake" not in out + err


# ---- probe 5: no Prefect ERROR output before a clear error ------------------------------------------

FULL_DISK = """
import sys
from raglake.errors import LakeError
from raglake.lake import store

def full(*args, **kwargs):
    raise LakeError("cannot write the lake: No space left on device")

store.Lake.write = full
from raglake.cli import main
sys.argv = ["raglake", *sys.argv[1:]]
main()
"""


@pytest.mark.flow
@pytest.mark.usefixtures("prefect_harness")
@pytest.mark.parametrize("verbose", [False, True])
def test_a_clear_error_inside_the_flow_is_one_line(tmp_path, verbose) -> None:
    """A raglake error raised inside the flow (here a full disk at landing) is printed as one line; Prefect's
    ERROR lines and tracebacks for it (~80 lines) appear only with --verbose."""
    from prefect.settings import get_current_settings

    env = {**os.environ, "PREFECT_API_URL": str(get_current_settings().api.url)}
    env.pop("PREFECT_LOGGING_LEVEL", None)  # the CLI's own default, as a user gets it
    args = ["run", "--golden", GOLDEN, "--target", CAPTURES, "--lake", str(tmp_path / "lake"), "--quiet"]
    done = subprocess.run(
        [sys.executable, "-c", FULL_DISK, *args, *(["--verbose"] if verbose else [])],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    both = done.stdout + done.stderr
    assert done.returncode == 2 and "error: cannot write the lake: No space left on device" in both, both[-3000:]
    noise = [line for line in both.splitlines() if "Traceback" in line or "| ERROR" in line]
    if verbose:
        assert noise, both[-3000:]  # what Prefect says is still there for whoever asks
    else:
        assert noise == [], both[-3000:]


def test_the_capture_journal_never_follows_a_symlink(tmp_path: Path) -> None:
    """A live run's capture journal was opened with open("a"): a link planted at its path (a shared cache folder)
    had every capture appended to the file it points at. The journal refuses a link, reading or writing."""
    from raglake.schemas import Capture, GoldenCase
    from raglake.targets.journal import CaptureJournal

    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    case = GoldenCase(id="c1", question="q?")
    for target in (victim, tmp_path / "created-through-the-link.jsonl"):
        link = tmp_path / f"link-to-{target.name}"
        link.symlink_to(target)
        journal = CaptureJournal(link)
        with pytest.raises(LakeError, match=f"capture journal {link} is a symbolic link"):
            journal.append(case, Capture(case_id="c1", answer="a"))
        with pytest.raises(LakeError, match="symbolic link"):
            journal.completed([case])
        assert link.is_symlink()
    assert victim.read_text() == "precious\n" and not (tmp_path / "created-through-the-link.jsonl").exists()
    journal = CaptureJournal(tmp_path / "captures" / "r.jsonl")  # a plain file still works, from nothing
    journal.append(case, Capture(case_id="c1", answer="a"))
    assert journal.completed([case])["c1"].answer == "a"
