"""How `raglake metaeval` prints a meta-evaluation: a heading per data set × split (its items, sampled or
not, and its kind of label), then one line per metric × statistic that carries a figure of its own, in
aligned columns that are never wrapped (73 columns for the built-in metrics, so an 80-column terminal
holds them). Figures without a value are folded into one line per reason; rows that repeat another
(sql/metaeval.sql's `repeats`) are left out and named in one line below, unless `--all` is given."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from rich.text import Text

from raglake.report.format import number

STATISTICS = {  # the lake's statistic names as printed
    "spearman": "Spearman",
    "pearson": "Pearson",
    "auroc": "AUROC",
    "balanced_accuracy": "bal. accuracy",
    "accuracy": "accuracy",
    "kappa": "Cohen's κ",
}
LABELS = {
    "similarity": "similarity labels",
    "support": "supported / not supported",
    "correctness": "correct / wrong",
    "preference": "preference between two answers",
}
HEADERS = ("metric", "statistic", "figure", "95% CI")
INDENT = "  "
GAP = "  "


def row_cells(r: dict[str, Any]) -> dict[str, str]:
    """The printed cells of one row (the one rounding, never -0.000)."""
    ci = f"[{number(r['ci_low'])}, {number(r['ci_high'])}]" if r["ci_low"] is not None else ""
    note = f"{r['n_failed']} of {r['n'] + r['n_failed']} without a value" if r["n_failed"] and r["n"] else ""
    if r.get("repeats"):  # shown with --all
        note = f"{note}; " if note else ""
        note += f"repeats {STATISTICS.get(r['repeats'], r['repeats'])}"
    return {
        "metric": r["metric"],
        "statistic": STATISTICS.get(r["statistic"], r["statistic"]),
        "figure": number(r["value"]),
        "95% CI": ci,
        "note": note,
    }


def _items(rows: list[dict[str, Any]]) -> str:
    """A group's items: every row of it is over the same items (n plus those without a value)."""
    items = max(r["n"] + r["n_failed"] for r in rows)
    total = rows[0]["n_total"]
    if rows[0]["split"] == "all" and total and items < total:
        return f"{items} of {total} items (sampled)"
    return f"{items} items"


def _undefined_lines(rows: list[dict[str, Any]]) -> list[str]:
    """Rows without a figure, one line per status and reason: the metrics it holds for."""
    why: dict[str, list[str]] = defaultdict(list)
    for r in rows:
        reason = f"{r['status']}: {r['reason']}" if r["reason"] and r["reason"] != r["status"] else r["status"]
        if r["metric"] not in why[reason]:
            why[reason].append(r["metric"])
    return [f"{INDENT}no figure ({reason}): {', '.join(metrics)}" for reason, metrics in why.items()]


def metaeval_lines(rows: list[dict[str, Any]], metaeval_id: str, width: int) -> list[Text]:
    """The printed lines of `rows` (sql/metaeval.sql's, already chosen), at a console `width`."""
    cells = [row_cells(r) for r in rows]
    widths = {h: max([len(h), *(len(c[h]) for c in cells)]) for h in HEADERS}

    def line(c: dict[str, str]) -> str:
        left = GAP.join(c[h].ljust(widths[h]) if h != "figure" else c[h].rjust(widths[h]) for h in HEADERS)
        return (INDENT + left).rstrip()

    out = [Text(f"meta-evaluation {metaeval_id}: agreement with people (figure and 95% bootstrap CI)", style="bold")]
    out.append(Text(line({h: h for h in HEADERS}), style="dim"))
    groups: dict[tuple[str, str], list[int]] = defaultdict(list)
    for i, r in enumerate(rows):
        groups[r["dataset"], r["split"]].append(i)
    for (dataset, split), members in groups.items():
        group = [rows[i] for i in members]
        kind = LABELS.get(group[0]["label_kind"], group[0]["label_kind"])
        out.append(Text(f"{dataset} · {split} · {_items(group)} · {kind}", style="bold"))
        for i in members:
            if rows[i]["value"] is None:
                continue
            text, note = line(cells[i]), cells[i]["note"]
            if note and len(text) + len(GAP) + len(note) > width:
                out += [Text(text), Text(INDENT * 2 + note, style="dim")]
            else:
                out.append(Text(f"{text}{GAP}{note}" if note else text))
        out += [Text(t, style="dim") for t in _undefined_lines([r for r in group if r["value"] is None])]
    return out


def repeated_line(rows: list[dict[str, Any]]) -> str | None:
    """One line naming the rows left out because they repeat another (AUROC of a 0/1 decider, a metric
    that gives another's figure), or None."""
    decided = sorted({r["metric"] for r in rows if r["repeats"] == "balanced_accuracy"})
    same = sorted({(r["metric"], r["repeats"]) for r in rows if r["repeats"] and r["repeats"] != "balanced_accuracy"})
    parts = []
    if decided:
        parts.append(f"the AUROC of {', '.join(decided)} (0/1 values: it is their balanced accuracy)")
    parts += [f"{metric} (`same_as` {other} in the registry)" for metric, other in same]
    if not parts:
        return None
    return f"not shown, as they repeat another row ({'; '.join(parts)}); --all shows every row"
