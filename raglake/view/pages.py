"""The pages of `raglake view`, one handler each: the lake is read under the state's lock, the page rendered
after it. Every id in a URL (run, case, judge call, meta-evaluation) is looked up in the lake as a SQL
parameter: a run id as `raglake` resolves it (an id, a prefix, latest, latest~N), the others exactly."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from typing import Any

import jinja2
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from raglake.analysis import LakeQueries
from raglake.errors import RaglakeError, UnknownNameError
from raglake.view.case import NotFound, call_page, case_page
from raglake.view.compare import compare_page
from raglake.view.lakewide import SqlLimits, metaeval_page, metrics_page, sql_csv, sql_table
from raglake.view.runs import run_page as run_data
from raglake.view.runs import runs_page, worst_page
from raglake.view.state import LakeState

CSS = "view.css"


@dataclass(frozen=True)
class Context:
    state: LakeState
    limits: SqlLimits
    env: jinja2.Environment

    def render(self, template: str, status: int = 200, **values: Any) -> HTMLResponse:
        html = self.env.get_template(template).render(lake=self.state.url, **values)
        return HTMLResponse(html, status_code=status)


def error_response(ctx: Context, exc: Exception) -> Response:
    """A page saying what went wrong: 404 for what the lake does not hold (an unknown run, case or call, a
    path that is no page), 400 for a request it cannot answer (a bad filter, a refused query)."""
    if isinstance(exc, HTTPException):
        status, message = exc.status_code, "no such page" if exc.status_code == 404 else str(exc.detail)
    else:
        status = 404 if isinstance(exc, (NotFound, UnknownNameError)) else 400
        message = str(exc)
    return ctx.render("error.html.j2", status=status, page="", status_code=status, message=message)


class Pages:
    """The handlers, bound to the app's context."""

    def __init__(self, ctx: Context):
        self.ctx = ctx

    def routes(self) -> list[tuple[str, Callable[[Request], Response]]]:
        return [
            ("/", self.home),
            ("/runs", self.runs),
            ("/runs/{run_id}", self.run),
            ("/runs/{run_id}/worst", self.worst),
            ("/runs/{run_id}/cases/{case_id:path}", self.case),
            ("/compare", self.compare),
            ("/calls/{call_key}", self.call),
            ("/metrics", self.metrics),
            ("/metaeval", self.metaeval),
            ("/metaeval/{metaeval_id}", self.metaeval),
            ("/sql", self.sql),
            ("/sql.csv", self.sql_download),
            (f"/static/{CSS}", self.stylesheet),
        ]

    def home(self, request: Request) -> Response:
        return RedirectResponse("/runs", status_code=303)

    def _data(self, name: str, request: Request, build: Callable[[LakeQueries], dict[str, Any]]) -> dict[str, Any]:
        """A page's figures, kept for its URL while the lake does not change (LakeState.page)."""
        key = (name, tuple(sorted(request.path_params.items())), tuple(sorted(request.query_params.multi_items())))
        return self.ctx.state.page(key, build)

    def runs(self, request: Request) -> Response:
        data = self._data("runs", request, lambda q: runs_page(q, request.query_params))
        return self.ctx.render("runs.html.j2", page="runs", **data)

    def run(self, request: Request) -> Response:
        by = request.query_params.get("by") or None

        def build(q: LakeQueries) -> dict[str, Any]:
            return run_data(q, q.run_ids([request.path_params["run_id"]])[0], by)

        return self.ctx.render("run.html.j2", page="runs", **self._data("run", request, build))

    def worst(self, request: Request) -> Response:
        data = self._data("worst", request, lambda q: worst_page(q, q.run_ids([request.path_params["run_id"]])[0]))
        return self.ctx.render("worst.html.j2", page="runs", **data)

    def case(self, request: Request) -> Response:
        against = request.query_params.get("against") or None

        def build(q: LakeQueries) -> dict[str, Any]:
            run_id = q.run_ids([request.path_params["run_id"]])[0]
            other = q.run_ids([against])[0] if against else None
            return case_page(q, run_id, request.path_params["case_id"], other)

        return self.ctx.render("case.html.j2", page="runs", **self._data("case", request, build))

    def compare(self, request: Request) -> Response:
        a, b = request.query_params.get("a") or "", request.query_params.get("b") or ""
        if not (a and b):
            with self.ctx.state.queries() as q:
                runs = q.runs(200)
            return self.ctx.render("pick.html.j2", page="runs", runs=runs, a=a, b=b)

        def build(q: LakeQueries) -> dict[str, Any]:
            return compare_page(q, q.run_ids([a])[0], q.run_ids([b])[0])

        return self.ctx.render("compare.html.j2", page="runs", **self._data("compare", request, build))

    def call(self, request: Request) -> Response:
        run_id, case_id = request.query_params.get("run"), request.query_params.get("case")
        data = self._data("call", request, lambda q: call_page(q, request.path_params["call_key"]))
        back = {"run_id": run_id, "case_id": case_id} if run_id and case_id else None
        return self.ctx.render("call.html.j2", page="runs", back=back, **data)

    def metrics(self, request: Request) -> Response:
        data = self._data("metrics", request, metrics_page)
        return self.ctx.render("metrics.html.j2", page="metrics", **data)

    def metaeval(self, request: Request) -> Response:
        data = self._data("metaeval", request, lambda q: metaeval_page(q, request.path_params.get("metaeval_id")))
        return self.ctx.render("metaeval.html.j2", page="metaeval", **data)

    def sql(self, request: Request) -> Response:
        text = request.query_params.get("q", "")
        result, error = None, None
        if text.strip():
            try:
                with self.ctx.state.queries() as q:
                    result = sql_table(q, text, self.ctx.limits)
            except RaglakeError as e:  # shown under the query box, which keeps the query
                error = str(e)
        status = 400 if error else 200
        return self.ctx.render("sql.html.j2", status=status, page="sql", query=text, result=result, error=error)

    def sql_download(self, request: Request) -> Response:
        text = request.query_params.get("q", "")
        if not text.strip():
            raise NotFound("no query given (/sql.csv?q=SELECT …)")
        with self.ctx.state.queries() as q:
            body = sql_csv(q, text, self.ctx.limits)
        headers = {"content-disposition": 'attachment; filename="raglake-query.csv"'}
        return Response(body, media_type="text/csv; charset=utf-8", headers=headers)

    def stylesheet(self, request: Request) -> Response:
        text = resources.files("raglake.view").joinpath("static", CSS).read_text(encoding="utf-8")
        return Response(text, media_type="text/css; charset=utf-8")
