"""The replay target, from a file and from an earlier run in the lake."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from raglake.errors import InputError, UnknownNameError
from raglake.golden import load_golden
from raglake.lake.query import fetch
from raglake.lake.store import Lake
from raglake.pipeline.lakes import open_lake
from raglake.targets import make_target
from tests.conftest import FIXTURES
from tests.lakekit import land

GOLDEN = str(FIXTURES / "mini_golden.jsonl")
CAPTURES = FIXTURES / "mini_captures.jsonl"


def test_replay_file_names_method_and_returns_captures_in_case_order(tmp_path: Path) -> None:
    target = make_target(f"replay:{CAPTURES}", Lake(str(tmp_path / "lake")))
    golden = load_golden(GOLDEN)
    target.check(golden)
    captures = target.capture(list(reversed(golden.cases)))
    assert target.name == "m1" and [c.case_id for c in captures] == ["c4", "c3", "c2", "c1"]
    assert captures[0].status == "error" and captures[0].failed


def test_missing_capture_is_a_failed_capture_not_a_crash(tmp_path: Path) -> None:
    path = tmp_path / "partial.jsonl"
    path.write_text(CAPTURES.read_text().splitlines()[0] + "\n")
    golden = load_golden(GOLDEN)
    captures = make_target(f"replay:{path}", Lake(str(tmp_path / "lake"))).capture(golden.cases)
    assert [c.status for c in captures] == ["ok", "error", "error", "error"]
    assert "no capture for this case" in captures[1].error


@pytest.mark.parametrize(
    ("line", "field", "words"),
    [
        (
            {"case_id": "c1", "retrieved": [{"rank": 0, "rel_path": "a.md"}]},
            "retrieved[0].rank",
            "greater than or equal to 1",
        ),
        (
            {"case_id": "c1", "retrieved": [{"rank": 1, "rel_path": "a.md"}, {"rank": 1, "rel_path": "b.md"}]},
            None,
            "duplicate rank",
        ),
        ({"case_id": "c1", "status": "failed"}, "status", "'ok', 'error', 'timeout' or 'empty'"),
        ({"case_id": "c1", "folder_mode": "onn"}, "folder_mode", "did you mean 'on'"),
        ({"case_id": "c1", "latency_ms": {"totl": 3}}, "latency_ms.totl", "did you mean 'total'"),
    ],
)
def test_bad_capture_lines_name_file_line_and_field(tmp_path: Path, line: dict, field: str | None, words: str) -> None:
    path = tmp_path / "caps.jsonl"
    path.write_text(json.dumps({"case_id": "c2"}) + "\n" + json.dumps(line) + "\n")
    with pytest.raises(InputError) as info:
        make_target(f"replay:{path}", Lake(str(tmp_path / "lake")))
    assert (info.value.line, info.value.field) == (2, field) and words in str(info.value)


def test_duplicate_and_unknown_case_ids(tmp_path: Path) -> None:
    lake = Lake(str(tmp_path / "lake"))
    dup = tmp_path / "dup.jsonl"
    dup.write_text('{"case_id": "c1"}\n{"case_id": "c1"}\n')
    with pytest.raises(InputError, match="duplicate capture for case 'c1' \\(first at line 1\\)"):
        make_target(f"replay:{dup}", lake)
    unknown = tmp_path / "unknown.jsonl"
    unknown.write_text('{"case_id": "c1"}\n{"case_id": "c12"}\n')
    with pytest.raises(InputError) as info:
        make_target(f"replay:{unknown}", lake).check(load_golden(GOLDEN))
    assert info.value.line == 2 and "did you mean 'c2'" in str(info.value)


def test_replay_run_reproduces_the_landed_scores(tmp_path: Path) -> None:
    lake_dir = str(tmp_path / "lake")
    land(lake_dir, GOLDEN, f"replay:{CAPTURES}", "r-orig")
    land(lake_dir, GOLDEN, "replay-run:r-orig", "r-again", minutes=1)
    q = open_lake(lake_dir)
    rows = fetch(
        q.con,
        """
        SELECT a.metric, a.case_id, a.status, b.status, a.value, b.value
        FROM scores a JOIN scores b USING (case_id, metric)
        WHERE a.run_id = 'r-orig' AND b.run_id = 'r-again'""",
    )
    assert len(rows) > 50
    assert all(sa == sb and (sa != "ok" or va == vb) for _, _, sa, sb, va, vb in rows)
    with pytest.raises(UnknownNameError, match="did you mean 'r-orig'"):
        make_target("replay-run:r-orgi", Lake(lake_dir))
