"""`raglake report`: one self-contained HTML file about a run (and its comparison with a baseline),
and the Markdown / table summaries the flow publishes as Prefect artifacts.

    data = gather(open_lake(lake), run_id, against=baseline_id)   # raglake.report.data
    write(data, "report.html")                                      # raglake.report.html

The names below are loaded when first used (PEP 562), not when this package is imported: every command
imports it (the console's number formats live in raglake.report.format), and only `raglake report`
needs the HTML writer and its charts (matplotlib and jinja2: ~0.5 s of every command's start)."""

from __future__ import annotations

from raglake.lazy import lazy_names

_EXPORTS = {
    "ReportData": "raglake.report.data",
    "gather": "raglake.report.data",
    "render": "raglake.report.html",
    "write": "raglake.report.html",
}
__all__ = ["ReportData", "gather", "render", "write"]

__getattr__, __dir__ = lazy_names(__name__, _EXPORTS, globals())
