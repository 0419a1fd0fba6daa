"""The `raglake` command's entry point (the console script and `python -m raglake`). Light on purpose, as
raglake.api.run is: a `raglake run` that may embed with the packaged model on the cpu starts that model's
process (raglake.embed.process) before the command line's own imports (~0.7 s) and its planning, so that
torch's import and the model's load there (~1.2 s) run beside them instead of inside the embedding stage (a
run in this process has no Prefect start to hide them behind; issue 29). A guess from the arguments alone:
`raglake run` stops a process its runs do not take once its settings are resolved (raglake.cli.jobs), and
the command's end at the latest (raglake.cli.main)."""

from __future__ import annotations

import sys
from collections.abc import Sequence

from raglake.embed import process
from raglake.embed.model import is_packaged, resolve_device, resolve_embedder_path
from raglake.errors import RaglakeError


def console() -> None:
    """`raglake ARGS`: the model's process on a guess, then the command line (raglake.cli.console)."""
    start_model_early(sys.argv[1:])
    from raglake import cli  # the command line's imports, while the model's process starts

    cli.console()


def start_model_early(args: Sequence[str]) -> None:
    """Start the packaged model's process for `raglake run ARGS` when ARGS name no embedder or device other than
    the packaged model on the cpu (the default metrics embed; where the chosen ones do not, the command stops
    the process as soon as its settings are resolved, before reading any input). A setting that is wrong is
    left to the command, which says so in its own words."""
    options = run_options(args)
    if options is None:
        return
    embedder, device = options.get("--embedder"), options.get("--device", "auto")
    try:
        if is_packaged(embedder) and device in ("auto", "cpu") and resolve_device(device) == "cpu":
            process.start_early(resolve_embedder_path(None)[1])
    except RaglakeError:  # e.g. a wrong RAGLAKE_MODEL_PROCESS: the command's own error line, later
        return


def run_options(args: Sequence[str]) -> dict[str, str] | None:
    """The options of `raglake run ARGS` by name (a flag's value is ""), or None when ARGS are another command
    or ask for help. A rough reading, for a guess only: the command line's own parser checks them."""
    if not args or args[0] != "run":
        return None
    options: dict[str, str] = {}
    rest = list(args[1:])
    while rest:
        word = rest.pop(0)
        if word in ("--help", "-h"):
            return None
        if word.startswith("--") and "=" in word:
            name, _, value = word.partition("=")
            options[name] = value
        elif word.startswith("-"):
            takes_value = bool(rest) and not rest[0].startswith("-")
            options[word] = rest.pop(0) if takes_value else ""
    return options
