"""Convert the labelled sets in ../shared/metaeval into raglake's labelled-item JSONL (docs/metaeval.md),
one file per data set, for inspection or for `raglake metaeval --data FILE`. `raglake metaeval` runs the
same converters (raglake.metaeval.sources) at run time, so nothing converted needs committing.

    python data/tools/metaeval_sets.py [--source ../shared/metaeval] [--out data/metaeval] [names …]
"""

from __future__ import annotations

import argparse
from pathlib import Path

from raglake.metaeval.items import write_items
from raglake.metaeval.plan import DEFAULT_SOURCE
from raglake.metaeval.sources import SOURCES, convert


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", type=Path, default=DEFAULT_SOURCE, help="the shared metaeval folder")
    parser.add_argument("--out", type=Path, default=Path("data/metaeval"), help="folder for the JSONL files")
    parser.add_argument("names", nargs="*", help=f"data sets (default all): {', '.join(SOURCES)}")
    args = parser.parse_args(argv)
    for name, items in convert(args.source, args.names or None).items():
        path = args.out / f"{name}.jsonl"
        write_items(path, items)
        print(f"{path}: {len(items)} items")


if __name__ == "__main__":
    main()
