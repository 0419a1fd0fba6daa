"""The embedder a run will use is loaded early, in a background thread, and warmed up there (one small
encode of texts of several lengths) before anyone else may use it: the run's first real encode no longer
pays the process's first-call costs, and nothing encodes with the model while the warm-up runs."""

from __future__ import annotations

import threading
import time

from raglake.embed.model import WARM_UP_TEXTS, Embedder
from raglake.metrics.registry import get_metric
from raglake.pipeline import embedding as embedding_module
from raglake.pipeline.embedding import load_embedder_early


class SlowModel:
    """Records every encode; the warm-up takes a while, so a concurrent caller would overlap it."""

    def __init__(self, log: list[str]) -> None:
        self.log = log

    def encode(self, texts, **kwargs):
        if texts == WARM_UP_TEXTS:
            self.log.append("warm-up started")
            time.sleep(0.3)
            self.log.append("warm-up done")
        else:
            self.log.append(f"encode {len(texts)}")
        return [[0.0]] * len(texts)


def test_a_warm_up_runs_before_anyone_else_gets_the_model(monkeypatch) -> None:
    log: list[str] = []
    monkeypatch.setattr(Embedder, "_load", lambda self: SlowModel(log))
    embedder = Embedder()
    loader = threading.Thread(target=embedder.load, kwargs={"warm": True})
    loader.start()
    while not log:  # the warm-up is under way
        time.sleep(0.01)
    embedder.model.encode(["a question"])  # waits for the load and its warm-up
    loader.join()
    assert log == ["warm-up started", "warm-up done", "encode 1"]


def test_a_model_loaded_on_first_use_is_not_warmed_up(monkeypatch) -> None:
    log: list[str] = []
    monkeypatch.setattr(Embedder, "_load", lambda self: SlowModel(log))
    embedder = Embedder()
    embedder.model.encode(["x", "y"])
    embedder.load(warm=True)  # already loaded: nothing more
    assert log == ["encode 2"]


def test_the_early_load_warms_the_runs_embedder_only_when_a_metric_embeds(monkeypatch) -> None:
    asked: list[tuple[str | None, str, bool]] = []

    class Recorder:
        key = "stub@0"

        def __init__(self, name, device):
            self.name, self.device = name, device

        def load(self, *, warm: bool = False) -> None:
            asked.append((self.name, self.device, warm))

    monkeypatch.setattr(embedding_module, "get_embedder", lambda name, device: Recorder(name, device))
    assert load_embedder_early([get_metric("recall_any_at_k")], None, "cpu") is None
    thread = load_embedder_early([get_metric("semantic_similarity")], None, "cpu")
    assert thread is not None
    thread.join(timeout=10)
    assert asked == [(None, "cpu", True)]
    # several lengths, up to about the model's 256 tokens: one text of each padded batch shape class
    assert len({len(t.split()) for t in WARM_UP_TEXTS}) >= 5 and max(len(t.split()) for t in WARM_UP_TEXTS) >= 200


def test_a_torch_failure_in_the_early_load_is_kept_for_the_stage_to_raise(monkeypatch) -> None:
    """A device out of memory during the load or the warm-up is no traceback from a background thread:
    it is kept on the thread, and the model is left unloaded so the stage's own load raises it in context."""

    class Failing:
        key = "stub@0"

        def load(self, *, warm: bool = False) -> None:
            raise RuntimeError("CUDA out of memory")

    monkeypatch.setattr(embedding_module, "get_embedder", lambda name, device: Failing())
    thread = load_embedder_early([get_metric("semantic_similarity")], None, "cuda")
    thread.join(timeout=10)
    assert isinstance(thread.failure, RuntimeError) and "out of memory" in str(thread.failure)


def test_a_command_that_stops_on_an_error_waits_for_the_early_load(monkeypatch) -> None:
    """An error before the run (Prefect's API does not answer) ended the process while the early load was inside
    torch's native start-up: SIGABRT ('terminate called without an active exception') instead of exit status 2.
    The command's exit now waits for the load."""
    import threading

    import typer

    from raglake import cli
    from raglake.errors import ConfigError

    release = threading.Event()

    class Slow:
        key = "stub@0"

        def load(self, *, warm: bool = False) -> None:
            release.wait(30)

    monkeypatch.setattr(embedding_module, "get_embedder", lambda name, device: Slow())
    monkeypatch.setattr(cli, "app", lambda: (_ for _ in ()).throw(ConfigError("the API does not answer")))
    monkeypatch.setattr(cli.typer.rich_utils, "MAX_WIDTH", 100)
    thread = load_embedder_early([get_metric("semantic_similarity")], None, "cpu")
    threading.Timer(0.5, release.set).start()
    try:
        cli.main()
    except (SystemExit, typer.Exit) as e:
        assert getattr(e, "code", None) == 2
    assert not thread.is_alive()  # main waited for the load before the process could exit
