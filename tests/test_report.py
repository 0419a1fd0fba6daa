"""`raglake report`: one self-contained HTML file per run. The figures in it are the lake's (headline
n, mean and CI; the comparison's regressions), the worst cases show the question, the chunks and the
judge's reasoning, every user text is escaped, nothing outside the file is referenced, and Chromium
(headless, offline) draws every chart without a console error or a network request."""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import html
import json
import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from raglake.analysis import LakeQueries
from raglake.cli import app
from raglake.errors import ConfigError
from raglake.judge.ledger import JudgeLedger
from raglake.lake.calls import LakeCallStore
from raglake.lake.query import run_query
from raglake.metrics.operational import RunInputs
from raglake.metrics.registry import all_metrics, metric_versions, repeated
from raglake.pipeline.lakes import open_lake
from raglake.pipeline.plan import plan_run
from raglake.pipeline.settings import RunSettings
from raglake.report.artifacts import summary_markdown, summary_table
from raglake.report.charts import BAR, BASELINE
from raglake.report.data import gather
from raglake.report.format import number, rounded
from raglake.report.html import num
from tests.browserkit import NEEDS_CHROMIUM, chromium
from tests.conftest import ROOT
from tests.judgekit import ScriptedGateway, canned, judge_outcomes
from tests.lakekit import land
from tests.rowpath import land_scored_run, score_batch

SAMPLE = str(ROOT / "data" / "golden" / "sample.jsonl")
BASIC, LOCAL = (f"replay:{ROOT / 'data' / 'captures' / f'{m}.jsonl'}" for m in ("basic_search", "local_search"))
REASONING = "The answer <em>misses</em> the point & cites nothing."
EXTERNAL = re.compile(
    r"""(?:\b(?:src|href|xlink:href|action|poster|data)\s*=\s*["']?\s*(?:https?:)?//)"""
    r"""|url\(\s*["']?\s*(?:https?:)?//|@import""",
    re.IGNORECASE,
)


# --- the lake: the two replayed sample methods, and a tiny judged run whose texts carry markup ---------


class LedgerGateway(ScriptedGateway):
    """The scripted judge, with each call in the lake's ledger (so scores carry a judge_call key)."""

    def __init__(self, ledger: JudgeLedger):
        super().__init__(answer=self.script)
        self.ledger = ledger

    @staticmethod
    def script(prompt_id: str, values: dict[str, Any]) -> dict[str, Any]:
        if prompt_id == "correctness":
            return {"score": 1 if "<script>" in values["question"] else 5, "reasoning": REASONING}
        return canned(prompt_id, values)

    async def call(self, prompt, values):
        result = await super().call(prompt, values)
        key = hashlib.sha256(json.dumps([prompt.id, values], sort_keys=True).encode()).hexdigest()
        self.ledger.record(
            {
                "call_key": key,
                "model": self.model,
                "prompt_id": prompt.id,
                "prompt_version": prompt.version,
                "status": "ok",
                "output": json.dumps(result.output),
                "attempts": 1,
            }
        )
        return dataclasses.replace(result, call_key=key)


def land_judged(lake: str, golden: str, target: str, run_id: str, minutes: int) -> None:
    """tests/lakekit.land, with the scripted judge's outcomes and ledger rows."""
    plan = plan_run(
        RunSettings(
            golden=golden,
            target=target,
            lake=lake,
            run_id=run_id,
            metrics=["recall_any_at_k", "correctness"],
            judge={"base_url": "http://127.0.0.1:9/v1", "model": "scripted-judge"},
        )
    )
    plan.started_at = dt.datetime(2026, 1, 1, tzinfo=dt.UTC) + dt.timedelta(minutes=minutes)
    captures = plan.target.capture(plan.golden.cases)
    pairs = list(zip(plan.golden.cases, captures))
    ledger = JudgeLedger(LakeCallStore(plan.lake), run_id)
    outcomes = judge_outcomes(pairs, plan.metrics, plan.config, gateway=LedgerGateway(ledger))
    ledger.flush()
    scored = score_batch(pairs, plan.metrics, plan.config, judge=outcomes)
    run_level = all_metrics(level="run")
    values = [v for m in run_level for v in m.fn(RunInputs(captures))]
    record = plan.record(plan.started_at + dt.timedelta(seconds=5), len(captures))
    record.metric_versions.update(metric_versions(run_level))
    record.index_version = "ix-0042"
    stats = [
        ("docs_seen", None, None, 3.0),
        ("docs_processed", None, None, 2.0),
        ("docs_not_indexed", None, "unsupported_type", 1.0),
        ("chunks_embedded", ".md", None, 7.0),
        ("tokens_per_chunk_mean", ".md", None, 41.5),
    ]
    coverage = {
        "index_version": ["ix-0042"] * len(stats),
        **dict(zip(("stat", "doc_type", "reason", "value"), map(list, zip(*stats)))),
    }
    land_scored_run(plan.lake, record, plan.golden.cases, captures, scored, values, plan.scoring_id, coverage=coverage)


def write_markup_inputs(folder: Path) -> tuple[str, str]:
    golden = [
        {
            "id": "x1",
            "question": "Is <script>alert('xss')</script> safe & sound?",
            "reference_answer": "No: <b>never</b>.",
            "category": "factual",
            "difficulty": "easy",
            "tags": ["<i>tag</i>", "costs $5 and $6"],
            "gold_supports": [{"rel_path": "work/a.md", "heading_path": "A"}],
        },
        {
            "id": "x2",
            "question": "Which queue does Atlas use?",
            "reference_answer": "RabbitMQ.",
            "category": "factual",
            "tags": ["queue"],
            "gold_supports": [{"rel_path": "work/q.md", "heading_path": "Q"}],
        },
    ]
    captures = [
        {
            "case_id": "x1",
            "method": "m",
            "answer": '<b>Yes</b>, see <a href="https://example.com/x">this</a>.',
            "retrieved": [
                {
                    "rank": 1,
                    "rel_path": "work/other.md",
                    "heading_path": "Other > <h1>",
                    "text": 'Chunk <img src="https://example.com/p.png"> with <script>alert(1)</script> & more.',
                }
            ],
        },
        {
            "case_id": "x2",
            "method": "m",
            "answer": "RabbitMQ [1].",
            "retrieved": [{"rank": 1, "rel_path": "work/q.md", "heading_path": "Q", "text": "Atlas runs RabbitMQ."}],
        },
    ]
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "golden.jsonl").write_text("".join(json.dumps(g) + "\n" for g in golden))
    (folder / "captures.jsonl").write_text("".join(json.dumps(c) + "\n" for c in captures))
    return str(folder / "golden.jsonl"), f"replay:{folder / 'captures.jsonl'}"


@dataclasses.dataclass
class Built:
    lake: str
    folder: Path
    reports: dict[str, Path]

    def q(self) -> LakeQueries:
        return open_lake(self.lake)


def report(built: Built, *args: str) -> Any:
    return CliRunner().invoke(app, ["report", *args, "--lake", built.lake], catch_exceptions=True)


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Built:
    folder = tmp_path_factory.mktemp("report")
    lake = str(folder / "lake")
    land(lake, SAMPLE, LOCAL, "r-local", minutes=0)
    land(lake, SAMPLE, BASIC, "r-basic", minutes=1)
    land_judged(lake, *write_markup_inputs(folder / "inputs"), "r-markup", minutes=2)
    out = Built(lake, folder, {})
    for name, args in {"compare": ["r-basic", "--against", "r-local"], "markup": ["r-markup"]}.items():
        path = folder / f"{name}.html"
        result = report(out, *args, "-o", str(path))
        assert result.exit_code == 0, (result.output, result.exception)
        assert str(path) in " ".join(result.output.split())
        out.reports[name] = path
    return out


# --- reading the report back ---------------------------------------------------------------------------


class Tables(HTMLParser):
    """Every table row of the page as (section id, row class, cell texts)."""

    def __init__(self, text: str):
        super().__init__(convert_charrefs=True)
        self.rows: list[tuple[str, str, list[str]]] = []
        self._section, self._cells, self._cell, self._class = "", None, None, ""
        self.feed(text)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "section":
            self._section = a.get("id") or ""
        elif tag == "tr":
            self._cells, self._class = [], a.get("class") or ""
        elif tag in ("td", "th") and self._cells is not None:
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._cell is not None:
            self._cells.append(" ".join("".join(self._cell).split()))
            self._cell = None
        elif tag == "tr" and self._cells is not None:
            self.rows.append((self._section, self._class, self._cells))
            self._cells = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)

    def section(self, name: str) -> list[tuple[str, list[str]]]:
        return [(cls, cells) for sec, cls, cells in self.rows if sec == name]


def f3(value: float) -> str:
    return f"{value:,.3f}"


# --- the tests -----------------------------------------------------------------------------------------


def test_headline_metrics_carry_the_lakes_n_mean_and_ci(built):
    text = built.reports["compare"].read_text()
    rows = {cells[0].split()[0]: cells for _, cells in Tables(text).section("headline") if cells[0] != "metric"}
    expected = built.q().metric_ci("r-basic", "all")
    twins = repeated({r["metric"] for r in expected})  # semantic_similarity: answer_correctness_emb's figure
    assert twins and not twins & set(rows)
    expected = [r for r in expected if r["metric"] not in twins]
    assert expected and {r["metric"] for r in expected} <= set(rows)
    for r in expected:
        cells = rows[r["metric"]]
        assert cells[2] == f"{r['n']:,}" and cells[3] == f3(r["mean"]), (r, cells)
        assert cells[4] == f"[{f3(r['ci_low'])}, {f3(r['ci_high'])}]"
    counts = {r["metric"]: r for r in built.q().breakdown(["r-basic"], "all")}
    assert rows["recall_any_at_k"][5] == f"{counts['recall_any_at_k']['n_undefined']:,}"
    unscored = rows["correctness"]  # no ok value: in the table of metrics without a value
    assert unscored[3] == f"{counts['correctness']['n_skipped']:,}" and unscored[5] == "no_judge"
    order = [m.name for m in all_metrics() if m.name in {r["metric"] for r in expected}]
    shown = [m for m in rows if m in set(order)]
    assert shown == order  # the registry's order
    assert "r-local" in text and "local_search" in text and "basic_search" in text  # header: both runs


def test_charts_and_worst_cases_follow_the_registrys_flags(built):
    """What the report charts and lists by worst case is the registry's metadata (headline, worst_cases),
    in the registry's order, grouped by family: no list of metric names in the report."""
    data = gather(built.q(), "r-markup", worst=2, n_boot=100)
    have = {r["metric"] for r in data.headline if r["n"]}
    headline = [m for m in all_metrics(level="case") if m.headline and m.name in have]
    assert headline and any(m.family == "judge" for m in headline)
    charted = [name for names in data.chart_groups.values() for name in names]
    assert charted == [m.name for m in headline]
    assert data.chart_groups["judge"] == [m.name for m in headline if m.family == "judge"]
    flagged = [m.name for m in all_metrics(level="case") if m.worst_cases and m.name in have]
    assert data.worst and list(data.worst) == [m for m in flagged if m in data.worst]
    assert set(data.worst) <= set(flagged[:6])


def test_comparison_flags_the_regressions_in_red(built):
    tables = Tables(built.reports["compare"].read_text()).section("comparison")
    overall = built.q().compare("r-local", "r-basic")
    twins = repeated({r["metric"] for r in overall})
    worse = {r["metric"] for r in overall if r["dimension"] == "all" and r["regression"] and r["metric"] not in twins}
    assert worse, "basic_search should regress against local_search"
    shown_worse = {cells[0].split()[0] for cls, cells in tables if cls == "regression" and len(cells) == 8}
    assert shown_worse == worse
    assert all(cells[-1] == "worse" for cls, cells in tables if cls == "regression")
    assert any(cls == "improvement" and cells[-1] == "better" for cls, cells in tables)
    slices = [cells for cls, cells in tables if cls == "regression" and len(cells) == 9]
    assert slices and all("=" in cells[1] or cells[1] in ("answerable", "unanswerable") for cells in slices)
    assert not [cells for cells in slices if cells[1].startswith("answerable=")]  # never answerable=answerable
    text = built.reports["compare"].read_text()
    assert 'id="chart-diff"' in text and "--bad: #fde2e1" in text


def test_worst_cases_show_question_answer_and_chunks(built):
    text = built.reports["compare"].read_text()
    q = built.q()
    worst = run_query(q.con, "worst_cases", run_id="r-basic", metrics=["recall_any_at_k"], n=10).to_pylist()
    sql = "SELECT value FROM scores_latest WHERE run_id = 'r-basic' AND metric = 'recall_any_at_k' AND status = 'ok'"
    values = [v for (v,) in q.con.sql(sql).fetchall()]
    below_best = sorted(v for v in values if v < 1.0)
    assert 0 < len(below_best) < 10 and values.count(1.0) > 10
    # a perfect score is never one of the "worst": only the cases below 1.0 are listed, lowest first
    assert [r["value"] for r in worst] == below_best[:10]
    plain = html.unescape(text)
    for case in worst:
        assert case["question"] in plain and case["case_id"] in text
    first_chunk = worst[0]["chunks"][0]
    assert " ".join(first_chunk["text"][:60].split()) in " ".join(plain.split())
    assert first_chunk["rel_path"] in plain
    assert text.count('<details class="case">') >= len(worst)


def test_user_text_is_escaped_and_judge_reasoning_shown(built):
    text = built.reports["markup"].read_text()
    assert "<script" not in text.lower() and "<img" not in text and "<em>misses" not in text
    assert "Is &lt;script&gt;alert(&#39;xss&#39;)&lt;/script&gt; safe &amp; sound?" in text
    assert "&lt;b&gt;Yes&lt;/b&gt;" in text and "Other &gt; &lt;h1" in text
    assert html.escape(REASONING) in text  # the judge's reasoning, from the ledger, escaped
    assert "scripted-judge" in text
    assert "&lt;i&gt;tag&lt;/i&gt;" in text  # a tag as a chart label: escaped inside the SVG too
    headline = {cells[0].split()[0]: cells for _, cells in Tables(text).section("headline") if cells[0] != "metric"}
    assert headline["correctness"][2] == "2" and headline["correctness"][3] == "3.000"


def test_coverage_and_run_figures(built):
    tables = Tables(built.reports["markup"].read_text())
    coverage = [cells for _, cells in tables.section("coverage")]
    assert coverage[0] == ["stat", "doc type", "reason", "value"]
    assert ["docs_not_indexed", "all", "unsupported_type", "1"] in coverage
    assert ["tokens_per_chunk_mean", ".md", "", "41.5"] in coverage
    assert "ix-0042" in built.reports["markup"].read_text()
    figures = {(cells[0], cells[1]): cells[2] for _, cells in tables.section("figures")}
    expected = {(r["metric"], r["stage"] or ""): r for r in built.q().figures(["r-markup"])}
    assert set(figures) - {("figure", "stage")} == set(expected)
    assert figures[("error_rate", "")] == f"{100 * expected[('error_rate', '')]['value']:.1f}%"


def test_no_reference_outside_the_file(built):
    for path in built.reports.values():
        text = path.read_text()
        assert not EXTERNAL.findall(text), EXTERNAL.findall(text)[:5]
        assert "<script" not in text.lower() and "<link" not in text.lower() and "<iframe" not in text.lower()
    text = built.reports["compare"].read_text()
    assert "http://" not in text and "https://" not in text  # not even an xmlns or a DOCTYPE
    assert text.count("<svg") >= 8 and "@font-face" not in text
    ids = re.findall(r'\sid="([^"]+)"', text)
    assert len(ids) == len(set(ids))  # several inline charts, no id (clip path, marker) shared
    refs = {a or b for a, b in re.findall(r'url\(#([^)]+)\)|xlink:href="#([^"]+)"', text)}
    assert refs and refs <= set(ids)  # and every reference inside the page resolves


def test_cli_errors_and_default_output(built, tmp_path, monkeypatch):
    result = report(built, "r-nope")
    assert isinstance(result.exception, ConfigError) and "unknown run 'r-nope'" in str(result.exception)
    result = report(built, "r-basic", "--against", "r-basic", "-o", str(tmp_path / "x.html"))
    assert isinstance(result.exception, ConfigError) and "--against" in str(result.exception)
    result = report(built, "r-basic", "-o", str(tmp_path / "missing" / "x.html"))
    assert isinstance(result.exception, ConfigError) and "does not exist" in str(result.exception)
    result = report(built, "r-basic", "--worst", "-1")
    assert isinstance(result.exception, ConfigError)
    monkeypatch.chdir(tmp_path)
    result = report(built, "latest", "--worst", "0")
    assert result.exit_code == 0, result.output
    assert (tmp_path / "report-r-markup.html").stat().st_size > 1000
    assert '<details class="case">' not in (tmp_path / "report-r-markup.html").read_text()


def test_artifact_summaries(built):
    q = built.q()
    table = summary_table(q, "r-basic", n_boot=200)  # n and mean do not depend on the resamples
    expected = {r["metric"]: r for r in q.metric_ci("r-basic", "all")}
    assert table[0]["metric"] == "recall_any_at_k"
    for row in table:
        assert row["n"] == expected[row["metric"]]["n"]
        assert row["mean"] == rounded(expected[row["metric"]]["mean"])  # the number the report and CLI show
    assert {r["family"] for r in table} == {"retrieval", "abstention", "embedding"}
    json.dumps(table)  # a Prefect table artifact takes plain values
    text = summary_markdown(q, "r-basic", "r-local", n_boot=200)
    assert (
        "| `recall_any_at_k` ↑ | retrieval | 54 |" in text and "**worse**" in text and "Slices that regressed" in text
    )
    markup = summary_markdown(q, "r-markup", n_boot=200)
    assert "`correctness` ↑ | judge | 2 |" in markup
    # the flow hands over the table it computed for the table artifact: the same Markdown
    assert summary_markdown(q, "r-basic", "r-local", n_boot=200, table=table) == text
    figures = next(line for line in text.splitlines() if line.startswith("**Run figures:**"))  # run-level headline
    assert "error_rate" in figures and "latency_p95_ms" in figures and "judge_ledger_hits" not in figures


def test_the_report_opens_with_the_verdict_then_the_cases_that_got_worse(built):
    text = built.reports["compare"].read_text()
    order = re.findall(r'<section id="([\w-]+)"', text)
    assert order[:4] == ["comparison", "worsened", "breakdown", "headline"], order
    box = text[text.index('class="verdict-box') : text.index("</div>", text.index('class="verdict-box'))]
    rows = built.q().compare("r-local", "r-basic")
    twins = repeated({r["metric"] for r in rows})
    worse = [r for r in rows if r["dimension"] == "all" and r["regression"] and r["metric"] not in twins]
    assert worse and all(f"<code>{r['metric']}</code>" in box for r in worse)
    for r in worse:  # each regression with its interval, in the shared formatting
        assert f"95% CI [{num(r['ci_low'])}, {num(r['ci_high'])}]" in box
    # in the overall table, the regressions come before every other row
    overall = [cls for cls, cells in Tables(text).section("comparison") if len(cells) == 8 and cells[0] != "metric"]
    assert overall[: len(worse)] == ["regression"] * len(worse) and "regression" not in overall[len(worse) :]


def test_cases_that_got_worse_show_both_answers(built):
    q = built.q()
    rows = run_query(
        q.con, "worsened_cases", run_a="r-local", run_b="r-basic", metrics=["recall_any_at_k", "ndcg_at_k"], n=3
    ).to_pylist()
    assert rows
    answers = {
        (run, case): answer for run, case, answer in q.con.sql("SELECT run_id, case_id, answer FROM cases").fetchall()
    }
    for metric in {r["metric"] for r in rows}:
        mine = [r for r in rows if r["metric"] == metric]
        harms = [(r["value_a"] - r["value_b"]) * (1 if r["higher_is_better"] else -1) for r in mine]
        assert all(h > 0 for h in harms) and harms == sorted(harms, reverse=True)
    for r in rows:
        assert r["answer_a"] == answers[("r-local", r["case_id"])]
        assert r["answer_b"] == answers[("r-basic", r["case_id"])]
    text = built.reports["compare"].read_text()
    section = " ".join(html.unescape(text.split('<section id="worsened">')[1].split("</section>")[0]).split())
    shown = [
        c for cases in gather(q, "r-basic", against="r-local", worst=0, n_boot=100).worsened.values() for c in cases
    ]
    assert shown
    for r in shown:  # the question, and both runs' answers side by side
        assert r["case_id"] in section and " ".join(r["question"].split()) in section
        assert " ".join((r["answer_a"] or "")[:80].split()) in section
        assert " ".join((r["answer_b"] or "")[:80].split()) in section


def test_breakdown_charts_draw_the_baseline_beside_the_candidate(built):
    compare, single = (built.reports[name].read_text() for name in ("compare", "markup"))
    section = compare.split('<section id="breakdown">')[1].split("</section>")[0]
    assert section.count(BASELINE) > 10 and section.count(BAR) > 10  # both runs' bars in every chart
    assert BASELINE not in single  # a report without a baseline draws the candidate only


def test_artifacts_show_the_means_the_report_shows(built):
    q = built.q()
    text = summary_markdown(q, "r-basic", "r-local", n_boot=200)
    data = gather(q, "r-basic", against="r-local", worst=0, n_boot=200)
    for r in data.headline:
        if r["family"] in ("retrieval", "abstention", "embedding"):
            assert f"| `{r['metric']}`" in text and f" | {r['n']} | {number(r['mean'])} | " in text
    for r in data.comparison.overall:
        if r["family"] in ("retrieval", "abstention", "embedding"):
            assert f"| `{r['metric']}` | {r['n_pairs']} | {number(r['mean_a'])} | {number(r['mean_b'])} |" in text


# --- in a real browser ---------------------------------------------------------------------------------


@NEEDS_CHROMIUM
def test_chromium_draws_every_chart_offline(built, tmp_path):
    with chromium("1280,2000") as driver:
        url = built.reports["compare"].resolve().as_uri()
        driver.get(url)
        shot = tmp_path / "report.png"
        assert driver.save_screenshot(str(shot)) and shot.stat().st_size > 10_000
        assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        charts = driver.execute_script("""
            document.querySelectorAll('details').forEach(d => d.open = true);  // the folded breakdowns too
            return Array.from(document.querySelectorAll('figure.chart svg')).map(svg => {
                const box = svg.getBoundingClientRect();
                return {w: box.width, h: box.height, drawn: svg.querySelectorAll('path, rect, use').length,
                        texts: svg.querySelectorAll('text').length};
            });""")
        assert len(charts) >= 8
        # the verdict is on the first screen, above the cases that got worse and the breakdowns
        tops = driver.execute_script(
            "return ['comparison', 'worsened', 'breakdown'].map(id => document.getElementById(id).offsetTop);"
        )
        assert tops[0] < 400 and tops == sorted(tops), tops
        for chart in charts:
            assert chart["w"] > 100 and chart["h"] > 50 and chart["drawn"] > 10 and chart["texts"] > 3, chart
        severe = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
        assert not severe, severe
        requests = [json.loads(e["message"])["message"] for e in driver.get_log("performance")]
        urls = [m["params"]["request"]["url"] for m in requests if m["method"] == "Network.requestWillBeSent"]
        assert urls and set(urls) == {url}, urls
