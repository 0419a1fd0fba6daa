"""`raglake metaeval`: how far the project's metrics (and a judge) agree with people, on labelled sets in one
JSONL format (raglake.metaeval.items; docs/metaeval.md)."""
