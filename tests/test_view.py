"""`raglake view` in process (Starlette's test client): every page shows what the lake's SQL files say, hostile
lake content is escaped or cut, no URL reads outside the lake, the SQL page is as read-only as `raglake sql`,
another --host prints a warning, and notebooks show a Result and a comparison as compact HTML."""

from __future__ import annotations

import html
import re
from html.parser import HTMLParser
from urllib.parse import quote

import pytest
from starlette.testclient import TestClient
from typer.testing import CliRunner

from raglake.api.display import ComparisonFrame
from raglake.api.lake import open_lake as open_frames
from raglake.api.result import Result
from raglake.cli import app as cli_app
from raglake.cli import sql_run
from raglake.errors import LakeError
from raglake.lake.query import run_query
from raglake.pipeline.lakes import open_lake
from raglake.report.data import comparison
from raglake.report.format import number
from raglake.view import web
from raglake.view.compare import compare_page
from tests.lakekit import MINI_GOLDEN, MINI_REPLAY, land
from tests.viewkit import HOSTILE_ID, HUGE, REASONING, ViewLake, build_view_lake

ROWS = 5  # the SQL page's table rows in these tests


@pytest.fixture(scope="module")
def view_lake(tmp_path_factory) -> ViewLake:
    return build_view_lake(tmp_path_factory.mktemp("view"))


def client_for(lake: str, *, rows: int = ROWS, timeout: float = 30) -> TestClient:
    limits = web.SqlLimits(sql_run.run_stoppable, rows, timeout)
    return TestClient(web.create_app(web.LakeState(lake), limits), raise_server_exceptions=True)


@pytest.fixture(scope="module")
def client(view_lake) -> TestClient:
    return client_for(view_lake.lake)


class Links(HTMLParser):
    """Every URL-valued attribute of a page, and the text of its <script> elements (there must be none)."""

    def __init__(self, text: str):
        super().__init__(convert_charrefs=True)
        self.urls: list[str] = []
        self.scripts = 0
        self.feed(text)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.scripts += tag == "script"
        self.urls += [v or "" for k, v in attrs if k in ("href", "src", "action", "formaction", "xlink:href", "poster")]
        self.urls += [f"on-handler {k}" for k, _ in attrs if k.startswith("on")]


def page(client: TestClient, url: str, status: int = 200) -> str:
    response = client.get(url)
    assert response.status_code == status, (url, response.status_code, response.text[:2000])
    return response.text


def plain(text: str) -> str:
    return html.unescape(" ".join(re.sub(r"<[^>]+>", " ", text).split()))


# --- what each page shows ---------------------------------------------------------------------------


def test_runs_page_lists_runs_newest_first_and_filters(client, view_lake):
    text = page(client, "/runs")
    order = [m for m in re.findall(r'href="/runs/([^"/]+)"', text)]
    assert order == [view_lake.hostile, view_lake.b, view_lake.a, view_lake.early]
    assert "<polyline" in text  # basic_search's two runs draw a sparkline
    only = page(client, "/runs?target=basic_search")
    assert re.findall(r'href="/runs/([^"/]+)"', only) == [view_lake.a, view_lake.early]
    assert re.findall(r'href="/runs/([^"/]+)"', page(client, "/runs?dataset=golden")) == [view_lake.hostile]
    assert re.findall(r'href="/runs/([^"/]+)"', page(client, "/runs?tag=" + quote("<img src=x onerror=alert(2)>"))) == [
        view_lake.hostile
    ]
    assert "No run matches" in page(client, "/runs?since=2027-01-01")
    assert len(re.findall(r'href="/runs/', page(client, "/runs?since=2026-01-01&until=2026-01-01"))) == 3
    assert "give a day as YYYY-MM-DD" in page(client, "/runs?since=yesterday", 400)


def test_run_page_shows_the_lakes_n_mean_and_interval(client, view_lake):
    text = plain(page(client, f"/runs/{view_lake.b}"))
    q = open_lake(view_lake.lake)
    for r in q.metric_ci(view_lake.b, "all"):
        assert f"{r['metric']} {'↑' if r['higher_is_better'] else '↓'}" in text
        assert f"{r['n']} {number(r['mean'])} [{number(r['ci_low'])}, {number(r['ci_high'])}]" in text
    assert "category=factual" in text  # the breakdown by category, the default
    raw = page(client, f"/runs/{view_lake.b}")
    for dimension in ("category", "tag", "difficulty", "vault", "answerable", "target", "method"):
        assert f'href="/runs/{view_lake.b}?by={dimension}#breakdowns"' in raw
    assert '?by=meta.author#breakdowns"' in raw  # the eval file's slices: [author]
    by_tag = plain(page(client, f"/runs/{view_lake.b}?by=tag"))
    tag_rows = [r for r in q.metric_ci(view_lake.b, "tag") if r["metric"] == "recall_any_at_k"]
    assert f"tag=atlas {number(next(r for r in tag_rows if r['slice'] == 'atlas')['mean'])}" in by_tag
    assert "has no dimension 'colour'" in plain(page(client, f"/runs/{view_lake.b}?by=colour", 404))
    worst = page(client, f"/runs/{view_lake.b}/worst")
    rows = run_query(q.con, "worst_cases", run_id=view_lake.b, metrics=["recall_any_at_k"], n=10).to_pylist()
    assert rows and all(f'href="{web.case_url(view_lake.b, r["case_id"])}"' in worst for r in rows)
    assert "error_rate" in text and "latency_p95_ms" in text and "judge_cost_usd" in text
    assert "Why values are missing" in text and "no unanswerable case" in text
    assert f"Compare with the previous run (basic_search): {view_lake.a}" in text  # no earlier local_search run
    assert f"Compare with the previous run of basic_search: {view_lake.early}" in plain(
        page(client, f"/runs/{view_lake.a}")
    )
    assert page(client, "/runs/latest~1") == page(client, f"/runs/{view_lake.b}")  # the CLI's run selectors


def test_compare_page_gives_the_reports_verdict_first(client, view_lake):
    text = page(client, f"/compare?a={view_lake.a}&b={view_lake.b}")
    q = open_lake(view_lake.lake)
    data = compare_page(q, view_lake.a, view_lake.b)
    cmp = comparison(q, view_lake.a, view_lake.b)
    assert data["verdict"].startswith("verdict (B = local_search against A = basic_search): over all cases")
    assert cmp.summary in plain(text) and data["verdict"] in plain(text)
    assert text.index('id="verdict-text"') < text.index('id="slices"') < text.index('id="moved"')
    first = next(iter(data["worsened"].values()))[0]  # the report's worsened_cases.sql rows
    assert f'href="{web.case_url(view_lake.b, first["case_id"], view_lake.a)}"' in text.replace("&amp;", "&")
    assert set(data["worsened"]) <= {r["metric"] for r in cmp.overall}
    assert "✓ rank" in text and "✗ missed" in text
    assert "pick two different runs" in page(client, f"/compare?a={view_lake.a}&b={view_lake.a}", 400)
    assert "baseline (A)" in page(client, "/compare")


def test_case_page_shows_chunks_gold_metrics_calls_and_sentences(client, view_lake):
    q = open_lake(view_lake.lake)
    case_id = run_query(q.con, "worsened_cases", run_a=view_lake.a, run_b=view_lake.b, metrics=["correctness"], n=1)[
        "case_id"
    ][0].as_py()
    text = page(client, web.case_url(view_lake.b, case_id, view_lake.a))
    metrics = run_query(q.con, "case_metrics", run_id=view_lake.b, case_id=case_id).to_pylist()
    assert len(re.findall(r"<tr class=\"(?:empty)?\"><td><code>", text)) == len(metrics)
    for m in metrics:
        assert f"<code>{m['metric']}</code>" in text
    assert text.count('class="answer"') == 2 and "gpt-4o-mini-2024-07-18" in text and "fp_view" in text
    assert "answer_hallucination" in plain(text.split('id="sentences"')[1])
    calls = run_query(q.con, "case_judge_calls", run_id=view_lake.b, case_id=case_id).to_pylist()
    call = next(c for c in calls if c["prompt_id"] == "correctness")
    assert REASONING.replace("<", "&lt;").replace(">", "&gt;") in text
    detail = page(client, web.call_url(call["call_key"], view_lake.b, case_id))
    assert "120 prompt · 30 completion" in plain(detail) and "Score how correctly" in detail
    assert "$0.000036" in detail or "$0.0000" in detail
    assert page(client, f"/runs/{view_lake.b}/cases/no-such-case", 404).count("has no case")


def test_metrics_and_metaeval_pages(client, view_lake):
    text = plain(page(client, "/metrics"))
    assert "recall_any_at_k retrieval case" in text and "spearman 0.610 [0.550, 0.670] sts-mini/all, n=200" in text
    meta = plain(page(client, "/metaeval"))
    assert "me-1" in meta and "answer_hallucination auroc 0.710 [0.640, 0.780]" in meta
    assert page(client, "/metaeval/me-1") == page(client, "/metaeval")
    assert "no meta-evaluation 'nope'" in plain(page(client, "/metaeval/nope", 404))


# --- hostile content and paths -----------------------------------------------------------------------


def test_hostile_lake_content_is_escaped_or_cut(client, view_lake):
    pages = {
        "runs": page(client, "/runs"),
        "run": page(client, f"/runs/{view_lake.hostile}"),
        "case": page(client, web.case_url(view_lake.hostile, HOSTILE_ID)),
        "huge": page(client, web.case_url(view_lake.hostile, "huge")),
        "sql": page(client, "/sql?q=" + quote("SELECT answer FROM cases WHERE run_id = 'r-hostile'")),
    }
    for name, text in pages.items():
        links = Links(text)
        assert links.scripts == 0, name
        assert all(u.startswith(("/", "#", "data:,")) for u in links.urls), (name, links.urls)
        assert "<script>alert" not in text and "<img src=x" not in text and 'href="javascript' not in text, name
    assert "&lt;script&gt;alert(&#39;pwned&#39;)&lt;/script&gt;" in pages["case"]
    assert "javascript:alert(3)" in pages["case"]  # the chunk's path, as text
    whole = len("start " + "x" * HUGE + " END-OF-HUGE")
    assert "show more" in pages["huge"] and f"cut here: {whole:,} characters in all" in pages["huge"]
    assert "END-OF-HUGE" not in pages["huge"] and len(pages["huge"]) < HUGE / 3


@pytest.mark.parametrize(
    "url",
    [
        "/runs/..%2F..%2F..%2Fetc%2Fpasswd",
        "/runs/r-local/cases/..%2F..%2F..%2F..%2Fetc%2Fpasswd",
        "/runs/r-local/cases/../../../../etc/passwd",
        "/static/..%2F..%2F..%2Fpyproject.toml",
        "/static/view.css%2F..%2F..%2F__init__.py",
        "/calls/..%2F..%2Fetc%2Fpasswd",
        "/metaeval/..%2F..%2Fruns",
        "/etc/passwd",
        "/sql.csv?q=" + quote("SELECT * FROM read_text('/etc/passwd')"),
    ],
)
def test_a_path_in_a_url_never_reads_outside_the_lake(client, url):
    response = client.get(url)
    assert response.status_code in (400, 404), (url, response.status_code)
    assert "root:" not in response.text and "[tool.setuptools]" not in response.text


def test_a_case_id_shaped_like_a_path_is_only_a_parameter(client, view_lake):
    text = page(client, web.case_url(view_lake.hostile, HOSTILE_ID))  # ../../etc/passwd, a case of the lake
    assert "Is &lt;script&gt;" in text and "root:" not in text


# --- the SQL page --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "query, said",
    [
        ("CREATE TABLE x AS SELECT 1", "refused a CREATE statement"),
        ("COPY (SELECT 1) TO 'out.csv'", "refused a COPY statement"),
        ("INSTALL httpfs", "refused an INSTALL statement"),
        ("SET enable_external_access = true", "refused a SET statement"),
        ("SELECT 1; DROP VIEW runs", "refused a DROP statement (drops an object), statement 2 of 2"),
        ("ATTACH 'x.db'", "refused an ATTACH statement"),
        ("SELECT * FROM read_csv('/etc/passwd')", "SQL error"),
    ],
)
def test_the_sql_page_is_read_only(client, query, said):
    text = page(client, "/sql?q=" + quote(query), 400)
    assert said in plain(text) and "root:" not in text
    assert client.get("/sql.csv?q=" + quote(query)).status_code == 400


def test_the_sql_page_shows_a_table_and_downloads_csv(client, view_lake):
    text = page(client, "/sql?q=" + quote("SELECT run_id, n_cases FROM runs ORDER BY run_id"))
    assert "<th>run_id</th><th>n_cases</th>" in text and f"<td>{view_lake.a}</td><td>66</td>" in text
    many = page(client, "/sql?q=" + quote("SELECT * FROM range(20)"))
    assert many.count("<tr>") == ROWS + 1 and "there are more" in many
    csv = client.get("/sql.csv?q=" + quote("SELECT * FROM range(20) t(i)"))
    assert csv.status_code == 200 and csv.headers["content-type"].startswith("text/csv")
    assert csv.text.splitlines() == ["i", *map(str, range(20))]
    assert client.post("/sql", data={"q": "SELECT 1"}).status_code == 405


def test_a_slow_query_is_stopped_at_the_time_out(view_lake):
    slow = client_for(view_lake.lake, timeout=0.3)
    text = page(slow, "/sql?q=" + quote("SELECT sum(hash(i)) FROM range(50000000000) t(i)"), 400)
    assert "query timed out after 0.3 s" in text
    assert "<td>1</td>" in page(slow, "/sql?q=SELECT+1")  # the connection is usable again


# --- the server ---------------------------------------------------------------------------------------


def test_headers_and_hosts(client):
    response = client.get("/runs")
    assert response.headers["content-security-policy"].startswith("default-src 'none'")  # no script can run
    assert response.headers["x-content-type-options"] == "nosniff"
    assert client.get("/runs", headers={"host": "evil.example"}).status_code == 400  # DNS rebinding
    assert client.get("/", follow_redirects=False).headers["location"] == "/runs"
    assert client.get("/static/view.css").headers["content-type"].startswith("text/css")


@pytest.mark.parametrize("listen", ["::1", "127.0.0.1", "localhost"])
def test_a_loopback_listener_answers_loopback_host_names_only(view_lake, listen):
    """Bound to IPv6's loopback (`--host ::1`) the app answered any Host header (Starlette's check cannot read
    `[::1]:port`), so a page elsewhere could reach the lake through DNS rebinding; every loopback address is held
    to the loopback names, with or without a port. Another address, chosen on purpose, answers any."""
    limits = web.SqlLimits(sql_run.run_stoppable, ROWS, 30)
    client = TestClient(web.create_app(web.LakeState(view_lake.lake), limits, host=listen))
    for good in ("[::1]:8765", "[::1]", "127.0.0.1:8765", "localhost:8765", "localhost"):
        assert client.get("/runs", headers={"host": good}).status_code == 200, good
    for bad in ("evil.example", "evil.example:8765", "[::2]:8765", "[::1", "[::1]x:80", ""):
        assert client.get("/runs", headers={"host": bad}).status_code == 400, bad
    anywhere = TestClient(web.create_app(web.LakeState(view_lake.lake), limits, host="::"))
    assert anywhere.get("/runs", headers={"host": "evil.example"}).status_code == 200


def test_runs_landed_while_it_serves_are_shown(tmp_path):
    lake = str(tmp_path / "lake")
    land(lake, MINI_GOLDEN, MINI_REPLAY, "r-first", minutes=0)
    client = client_for(lake)
    assert "r-first" in page(client, "/runs") and "r-second" not in page(client, "/runs")
    land(lake, MINI_GOLDEN, MINI_REPLAY, "r-second", minutes=1)
    assert "r-second" in page(client, "/runs") and "r-second" in page(client, "/sql?q=SELECT+run_id+FROM+runs")


def test_another_host_prints_a_warning(view_lake, monkeypatch):
    import uvicorn

    monkeypatch.setattr(uvicorn.Server, "run", lambda self, sockets=None: None)
    loud = CliRunner().invoke(cli_app, ["view", "--lake", view_lake.lake, "--host", "0.0.0.0", "--port", "0"])
    assert loud.exit_code == 0, loud.output
    assert "warning: listening on 0.0.0.0, not on the loopback interface" in " ".join(loud.output.split())
    quiet = CliRunner().invoke(cli_app, ["view", "--lake", view_lake.lake, "--port", "0"])
    assert quiet.exit_code == 0 and "warning" not in quiet.output and "http://127.0.0.1:" in quiet.output
    missing = CliRunner().invoke(cli_app, ["view", "--lake", str(view_lake.lake) + "-nope"])
    assert isinstance(missing.exception, LakeError) and "no lake at" in str(missing.exception)


# --- notebooks ----------------------------------------------------------------------------------------


def test_notebooks_show_headline_metrics_and_the_verdict(view_lake):
    result = Result.of(view_lake.b, view_lake.lake)
    shown = result._repr_html_()
    for r in result.summary().to_dict("records"):
        assert f">{r['metric']}<" in shown and f"[{number(r['ci_low'])}, {number(r['ci_high'])}]" in shown
    compared = result.compare(view_lake.a)
    assert isinstance(compared, ComparisonFrame) and compared.verdict.startswith("verdict (B = local_search")
    assert compared._repr_html_().startswith(f"<p><strong>{compared.verdict}</strong></p>")
    assert type(compared[compared["verdict"] == "worse"]).__name__ == "DataFrame"  # a derived frame: plain
    lake = open_frames(view_lake.lake)._repr_html_()
    assert view_lake.hostile in lake and "4 run(s)" in lake
    hostile = Result.of(view_lake.hostile, view_lake.lake)._repr_html_()
    assert "<script" not in hostile and "<img" not in hostile
