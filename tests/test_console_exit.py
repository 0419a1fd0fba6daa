"""The `raglake` command leaves promptly (raglake.cli.console, issue 29): what the interpreter does at exit
is still done (atexit handlers, the standard streams flushed, a running thread waited for), with the same
exit status; only the tearing down of every module is skipped."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from tests.conftest import ROOT

HEAD = "import sys; from raglake.cli import {entry}; sys.argv = ['raglake', *sys.argv[1:]]\n"


def _raglake(entry: str, *args: str, prelude: str = "") -> subprocess.CompletedProcess[str]:
    code = textwrap.dedent(prelude) + HEAD.format(entry=entry) + f"{entry}()\n"
    return subprocess.run(
        [sys.executable, "-c", code, *args], cwd=ROOT, capture_output=True, text=True, timeout=120, check=False
    )


def test_the_command_prints_all_of_its_output_and_keeps_its_exit_status(tmp_path: Path) -> None:
    fast, plain = _raglake("console", "metrics"), _raglake("main", "metrics")
    assert fast.returncode == plain.returncode == 0
    assert fast.stdout == plain.stdout and len(fast.stdout) > 4000  # piped: block-buffered, flushed at exit
    missing = str(tmp_path / "nowhere")
    fast, plain = _raglake("console", "runs", "--lake", missing), _raglake("main", "runs", "--lake", missing)
    assert fast.returncode == plain.returncode != 0
    assert fast.stdout == plain.stdout and fast.stdout.strip()


def test_exit_handlers_run_and_a_running_thread_is_waited_for(tmp_path: Path) -> None:
    handler, thread = tmp_path / "handler", tmp_path / "thread"
    prelude = f"""
        import atexit, threading, time
        from pathlib import Path
        atexit.register(lambda: Path({str(handler)!r}).write_text("ran"))
        threading.Thread(target=lambda: (time.sleep(1.0), Path({str(thread)!r}).write_text("done"))).start()
        """
    done = _raglake("console", "metrics", prelude=prelude)
    assert done.returncode == 0, done.stderr[-2000:]
    assert handler.read_text() == "ran" and thread.read_text() == "done"


def test_a_full_standard_output_is_an_error_status() -> None:
    with open("/dev/full", "w") as full:
        done = subprocess.run(
            [sys.executable, "-m", "raglake", "metrics"], cwd=ROOT, stdout=full, stderr=subprocess.PIPE, timeout=120
        )
    assert done.returncode != 0
