"""Two `raglake run` processes landing in one lake at the same time while a reader polls it (issue 10):
no error anywhere, and the reader sees every run either not at all or whole (its row counts equal to
the final ones whenever it is visible). Both processes evaluate the same replayed target, so they
also share every capture and scoring cache key."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

import pytest

from raglake.lake.query import connect, fetch
from raglake.lake.store import Lake
from raglake.pipeline.plan import SAMPLE_CAPTURES, SAMPLE_GOLDEN
from tests.conftest import ROOT

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("prefect_harness")]

METRICS = "recall_any_at_k,mrr_at_k,ndcg_at_k,precision_at_k,attribution_hit,abstention_accuracy"
COUNTS = """
    SELECT r.run_id, (SELECT count(*) FROM cases c WHERE c.run_id = r.run_id),
           (SELECT count(*) FROM chunks c WHERE c.run_id = r.run_id),
           (SELECT count(*) FROM scores s WHERE s.run_id = r.run_id),
           (SELECT count(*) FROM run_metrics m WHERE m.run_id = r.run_id)
    FROM runs r"""


def _counts(lake: str) -> dict[str, tuple[int, ...]]:
    return {run_id: tuple(rest) for run_id, *rest in fetch(connect(Lake(lake)), COUNTS)}


def test_two_writers_and_a_reader(tmp_path) -> None:
    from prefect.settings import get_current_settings

    lake = str(tmp_path / "lake")
    env = {**os.environ, "PREFECT_API_URL": str(get_current_settings().api.url)}
    env.pop("RAGLAKE_LAKE", None)
    seen: list[dict[str, tuple[int, ...]]] = []
    errors: list[BaseException] = []
    done = threading.Event()

    def poll() -> None:
        while not done.is_set():
            try:
                seen.append(_counts(lake))
            except BaseException as e:  # noqa: BLE001 - any reader error fails the test below
                errors.append(e)
            time.sleep(0.05)

    reader = threading.Thread(target=poll, name="lake-reader")
    reader.start()
    writers = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "raglake",
                "run",
                "--golden",
                SAMPLE_GOLDEN,
                "--target",
                SAMPLE_CAPTURES[1],
                "--lake",
                lake,
                "--run-id",
                run_id,
                "--metrics",
                METRICS,
                "--batch-size",
                "10",
                "--quiet",
            ],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for run_id in ("r-one", "r-two")
    ]
    try:
        outputs = [w.communicate(timeout=300) for w in writers]
    finally:
        done.set()
        reader.join(timeout=60)
    for w, (out, err) in zip(writers, outputs):
        assert w.returncode == 0, (out[-2000:], err[-4000:])
    assert not errors, errors[:3]

    final = _counts(lake)
    assert set(final) == {"r-one", "r-two"}
    assert final["r-one"] == final["r-two"] and min(final["r-one"]) > 0  # the same evaluation twice
    partial = [(run_id, got) for snapshot in seen for run_id, got in snapshot.items() if got != final[run_id]]
    assert not partial, partial[:5]
    visible = [sum(run_id in s for s in seen) for run_id in ("r-one", "r-two")]
    print(f"reader: {len(seen)} polls, run visible in {visible} of them, {len(errors)} errors")
    assert len(seen) > 10  # the reader really polled during the runs
