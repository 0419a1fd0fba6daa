"""A live target's captures answer one request setting: a retry of the same run id with another --k
must ask the service again, from the Prefect capture cache and from the capture journal alike
(issue 10, found while fixing stale rows on retry)."""

from __future__ import annotations

from pathlib import Path

from raglake.schemas import Capture
from raglake.targets.http import HttpTarget
from raglake.targets.journal import CaptureJournal
from tests.faultkit import golden_cases, service_config


def test_the_content_key_of_a_live_target_names_k(tmp_path: Path) -> None:
    config = str(service_config(tmp_path, 9))
    assert HttpTarget(config, k=3).content_key() != HttpTarget(config, k=5).content_key()
    assert HttpTarget(config, k=5).content_key() == HttpTarget(config, k=5).content_key()


def test_a_journal_serves_only_captures_taken_with_the_same_target_settings(tmp_path: Path) -> None:
    case = golden_cases(["c1"])[0]
    path = tmp_path / "journal.jsonl"
    CaptureJournal(path, scope="http:abc:k=5").append(case, Capture(case_id="c1", answer="taken at k=5"))
    assert CaptureJournal(path, scope="http:abc:k=5").completed([case])["c1"].answer == "taken at k=5"
    assert CaptureJournal(path, scope="http:abc:k=3").completed([case]) == {}
