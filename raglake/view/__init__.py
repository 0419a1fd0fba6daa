"""`raglake view`: a read-only local web app over the lake (docs/view.md). raglake.view.web builds the
Starlette app, raglake.view.pages its pages, which read the lake through the SQL files every command uses
(raglake.view.runs, compare, case, lakewide) over one connection (raglake.view.state)."""
