"""The README's first steps ("Two commands" up to "Evaluating your own system") run once per session, as a
newcomer runs them: `make run` (the builtin RAG), the two replayed methods, every "ask the lake" command
and the report, from a scratch folder holding the checkout's `.venv` and `data` (the lake goes to
$RAGLAKE_LAKE, outside the repository), each command starting its own temporary Prefect server.

The session fixture `readme_first_steps` (tests/conftest.py) holds what they printed and the lake they
left: tests/test_readme_order.py checks that every step worked in order, and tests/test_cli.py checks
the main job's lake and the replayed runs' queries on the same lake instead of evaluating the sample
twice more."""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from tests.conftest import ROOT


def first_steps() -> list[str]:
    """The commands of the README from "Two commands" up to "Evaluating your own system", in order
    (`make run` as what it runs: `.venv/bin/raglake run`)."""
    text = (ROOT / "README.md").read_text()
    part = text[text.index("\n## Two commands\n") : text.index("\n## Evaluating your own system\n")]
    commands = []
    for block in re.findall(r"```bash\n(.*?)```", part, flags=re.S):
        for line in block.splitlines():
            command = re.sub(r"\s+#.*$", "", line).strip()
            if command.startswith("make run"):
                commands.append(".venv/bin/raglake run")
            elif command.startswith(".venv/bin/raglake"):
                commands.append(command)
    return commands


@dataclass
class FirstSteps:
    folder: Path  # the scratch folder the commands ran in
    lake: str
    outputs: list[tuple[str, str]] = field(default_factory=list)  # (command, its stdout with whitespace folded)
    failed: str | None = None  # the first command that failed, with its output (the later ones did not run)
    printed: list[tuple[str, str]] = field(default_factory=list)  # (command, its stdout as printed)

    def output(self, prefix: str) -> str:
        """What the first command starting with `prefix` printed (whitespace folded)."""
        assert self.failed is None, self.failed
        found = [out for command, out in self.outputs if command.startswith(prefix)]
        assert found, f"no README first step starts with {prefix!r}: {[c for c, _ in self.outputs]}"
        return found[0]

    def lines(self, prefix: str) -> list[str]:
        """The lines the first command starting with `prefix` printed on stdout (progress goes to stderr)."""
        assert self.failed is None, self.failed
        found = [out for command, out in self.printed if command.startswith(prefix)]
        assert found, f"no README first step starts with {prefix!r}: {[c for c, _ in self.printed]}"
        return found[0].splitlines()


def run_first_steps(folder: Path) -> FirstSteps:
    """Every first step, in order, in `folder`; stops at the first command that fails (`bash -e`)."""
    for link in (".venv", "data"):
        (folder / link).symlink_to(ROOT / link)
    steps = FirstSteps(folder, str(folder / "lake"))
    env = {**os.environ, "RAGLAKE_LAKE": steps.lake, "COLUMNS": "200"}
    env.pop("PREFECT_API_URL", None)  # each command starts its own server, as a newcomer's would
    for command in first_steps():
        done = subprocess.run(
            ["bash", "-e", "-c", command], cwd=folder, env=env, capture_output=True, text=True, timeout=900
        )
        if done.returncode != 0:
            steps.failed = f"{command} exited {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
            break
        steps.outputs.append((command, " ".join(done.stdout.split())))
        steps.printed.append((command, done.stdout))
    return steps
