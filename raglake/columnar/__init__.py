"""The columnar data path: golden sets and captures read into Arrow tables in bulk (raglake.columnar.golden,
raglake.columnar.captures), validated by the same rules as the record models, with the per-record path
(raglake.records) run only to explain a problem; vectorised anchor matching (raglake.columnar.anchors)."""
