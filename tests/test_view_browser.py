"""`raglake view` in a real browser: the command serves the sample lake (tests/viewkit.py: the two replayed
methods, judged through the real gateway), and headless Chromium clicks Runs → a run → Compare with the
previous run → a case that got worse → its judge call, checking what each page shows and that nothing is
fetched from anywhere but the view itself. A screenshot of each page is saved (the folder is printed)."""

from __future__ import annotations

import json
import os
import queue
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.browserkit import NEEDS_CHROMIUM, chromium
from tests.conftest import ROOT
from tests.viewkit import REASONING, ViewLake, build_view_lake

ADDRESS = re.compile(r"on (http://127\.0\.0\.1:\d+)/")

pytestmark = NEEDS_CHROMIUM


@pytest.fixture(scope="module")
def view_lake(tmp_path_factory) -> ViewLake:
    return build_view_lake(tmp_path_factory.mktemp("view-browser"))


def _first_line(proc: subprocess.Popen, timeout: float) -> str:
    """The server's first line of output (its address), or a failure with what it printed."""
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in proc.stdout], daemon=True).start()
    try:
        return lines.get(timeout=timeout)
    except queue.Empty:
        proc.kill()
        pytest.fail(f"raglake view printed nothing in {timeout} s")


@pytest.fixture
def served(view_lake: ViewLake) -> Iterator[str]:
    """`raglake view --port 0` on the lake (it never touches Prefect: no harness); its base URL."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "raglake", "view", "--lake", view_lake.lake, "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=ROOT,
        env={**os.environ, "COLUMNS": "400"},
    )
    try:
        line = _first_line(proc, 60)
        found = ADDRESS.search(line)
        assert found, line
        yield found.group(1)
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture
def driver() -> Iterator:
    with chromium("1400,1800") as browser:
        yield browser


def _text(driver, css: str) -> str:
    from selenium.webdriver.common.by import By

    return " ".join(driver.find_element(By.CSS_SELECTOR, css).text.split())


def _shot(driver, folder: Path, name: str) -> None:
    path = folder / f"{name}.png"
    assert driver.save_screenshot(str(path)) and path.stat().st_size > 10_000
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_runs_to_a_judge_call_in_chromium(served, driver, view_lake, tmp_path):
    from selenium.webdriver.common.by import By

    shots = tmp_path / "view-screenshots"
    shots.mkdir()
    print(f"\nscreenshots of raglake view: {shots}")

    driver.get(f"{served}/runs")  # Runs: every run, newest first, with sparklines
    _shot(driver, shots, "1-runs")
    listed = [a.text for a in driver.find_elements(By.CSS_SELECTOR, "table.runs td a.mono")]
    assert listed == [view_lake.hostile, view_lake.b, view_lake.a, view_lake.early]
    assert driver.find_elements(By.CSS_SELECTOR, "table.runs svg.spark polyline")  # basic_search's two runs
    driver.find_element(By.LINK_TEXT, view_lake.b).click()

    assert driver.current_url == f"{served}/runs/{view_lake.b}"  # Run: headline metrics with n and CI
    _shot(driver, shots, "2-run")
    headline = _text(driver, "#headline table")
    assert (
        "correctness ↑" in headline
        and "recall_any_at_k ↑" in headline
        and re.search(r"\[\d\.\d{3}, \d\.\d{3}\]", headline)
    )
    assert "meta.author" in _text(driver, "#breakdowns nav")  # the eval file's slices: [author]
    driver.find_element(By.ID, "compare-previous").click()

    assert driver.current_url.endswith(f"/compare?a={view_lake.a}&b={view_lake.b}")  # Compare: the verdict first
    _shot(driver, shots, "3-compare")
    verdict = _text(driver, "#verdict-text")
    assert verdict.startswith("verdict (B = local_search against A = basic_search): over all cases"), verdict
    assert "Slices:" in verdict
    moved = driver.find_element(By.CSS_SELECTOR, "#moved tr.moved")
    a_side, b_side = (" ".join(moved.find_element(By.CSS_SELECTOR, f"td.side-{s}").text.split()) for s in "ab")
    assert a_side and b_side and a_side != b_side  # both answers, side by side
    assert driver.find_elements(By.CSS_SELECTOR, "#moved ul.gold li.hit")  # a gold support a run retrieved
    case_id = moved.find_element(By.CSS_SELECTOR, "a.case-link").text
    moved.find_element(By.CSS_SELECTOR, "a.case-link").click()

    assert f"/runs/{view_lake.b}/cases/{case_id}?against={view_lake.a}" in driver.current_url  # Case
    _shot(driver, shots, "4-case")
    assert len(driver.find_elements(By.CSS_SELECTOR, "#answers td.answer")) == 2
    marked = driver.find_elements(By.CSS_SELECTOR, "#chunks tr.gold-match .gold-mark")
    assert marked and marked[0].text.startswith("✓ gold #")  # a chunk marked as a gold match
    assert "correctness" in _text(driver, "#metrics") and "gpt-4o-mini-2024-07-18" in _text(driver, "#calls")
    driver.find_element(By.CSS_SELECTOR, "#calls a.call-link").click()

    assert "/calls/" in driver.current_url  # the judge call: prompt, reply, model, fingerprint, tokens, cost
    _shot(driver, shots, "5-judge-call")
    meta = _text(driver, "#call-meta")
    assert "gpt-4o-mini-2024-07-18" in meta and "fp_view" in meta and "120 prompt · 30 completion" in meta
    assert _text(driver, "#prompt pre") and _text(driver, "#reply pre")
    assert REASONING in _text(driver, "#reasoning") or "no support" in _text(driver, "#reasoning")

    severe = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
    assert not severe, severe
    requests = [json.loads(e["message"])["message"] for e in driver.get_log("performance")]
    urls = [m["params"]["request"]["url"] for m in requests if m["method"] == "Network.requestWillBeSent"]
    # offline: nothing from elsewhere (data: URLs are the browser's own form controls' icons, never fetched)
    assert urls and all(u.startswith((served + "/", "data:")) for u in urls), urls
