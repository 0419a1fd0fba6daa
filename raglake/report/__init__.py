"""`raglake report`: one self-contained HTML file about a run (and its comparison with a baseline),
and the Markdown / table summaries the flow publishes as Prefect artifacts.

    data = gather(open_lake(lake), run_id, against=baseline_id)   # raglake.report.data
    write(data, "report.html")                                      # raglake.report.html
"""

from __future__ import annotations

from raglake.report.data import ReportData, gather
from raglake.report.html import render, write

__all__ = ["ReportData", "gather", "render", "write"]
