"""The questions users ask of the lake, answered by the SQL files: which runs, breakdowns,
comparisons (a paired test and interval per metric and slice, the false discovery rate controlled
across them), and trends."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import duckdb
import pyarrow as pa

from raglake.errors import ConfigError, LakeError, UnknownNameError
from raglake.lake.query import connect, fetch, run_query, scalar
from raglake.lake.store import Lake
from raglake.schemas import LATENCY_STAGES

DIMENSIONS = ("all", "category", "tag", "difficulty", "vault", "answerable", "target", "method")
COMPARE_DIMENSIONS = tuple(d for d in DIMENSIONS if d not in ("target", "method"))
DEFAULT_FDR = 0.05  # Benjamini-Hochberg level of compare's, the report's and the gate's verdicts
FDR_OFF = ("off", "none", "no", "false")


def parse_fdr(value: object) -> float | None:
    """An FDR level as users write it (`--fdr 0.1`, `fdr: 0.1` in gate rules): a number between 0 and
    1, or off (`off`, `none`, YAML's `false`): None, the verdicts are then the per-slice ones."""
    if value is None or value is False or (isinstance(value, str) and value.strip().lower() in FDR_OFF):
        return None
    try:
        level = float(value) if not isinstance(value, bool) else float("nan")
    except (TypeError, ValueError):
        level = float("nan")
    if not 0 < level < 1:
        raise ConfigError(f"FDR level {value!r}: give a number between 0 and 1 (e.g. {DEFAULT_FDR}) or 'off'")
    return level


def verdict_summary(rows: Sequence[Mapping[str, Any]], fdr: float | None) -> str:
    """How many tests a comparison (compare_runs rows) made and how many differences it calls real,
    FDR-controlled and uncorrected."""
    tested = [r for r in rows if r["tested"]]
    real = sum(bool(r["regression"] or r["improvement"]) for r in tested)
    raw = sum(bool(r["regression_raw"] or r["improvement_raw"]) for r in tested)
    tests = f"{len(tested)} tests (metric × slice with enough pairs and a direction)"
    level = rows[0].get("level", 0.95) if rows else 0.95  # 1 - alpha of the comparison
    if fdr is None:
        return (
            f"{tests}, no multiple-comparison control (--fdr off): {raw} difference(s) whose own {100 * level:g}% "
            f"interval excludes 0, about {(1 - level) * len(tested):.0f} of which chance alone would give if "
            "nothing changed"
        )
    return (
        f"{tests}; Benjamini-Hochberg at a false discovery rate of {fdr:g}: {real} real difference(s) "
        f"({raw} whose own {100 * level:g}% interval excludes 0, uncorrected)"
    )


MAX_NAMED = 2  # metrics named per direction in the verdict's line (the others counted): it stays one or two lines


def verdict_headline(rows: Sequence[Mapping[str, Any]], subject: str = "") -> str:
    """The comparison's verdict in one or two lines, regressions first: which metrics moved over all cases
    (their difference and its per-slice 95% CI, the interval the tables, the report and the API show; at
    most MAX_NAMED per direction, one better when some got worse, the rest counted) and how many slices got
    worse or better. `subject`: what is compared ("B = x against A = y"), shown in parentheses."""
    overall = [r for r in rows if r["dimension"] == "all"]
    slices = [r for r in rows if r["dimension"] != "all"]

    def moved(flag: str, named: int) -> str:
        found = [r for r in overall if r[flag]]  # in the rows' order (the registry's)
        shown = [f"{r['metric']} {r['diff']:+.3f} ({interval(r)})" for r in found[:named]]
        more = f" and {len(found) - named} more" if len(found) > named else ""
        return ", ".join(shown) + more

    worse = moved("regression", MAX_NAMED)
    better = moved("improvement", 1 if worse else MAX_NAMED)
    parts = [f"worse on {worse}" if worse else "", f"better on {better}" if better else ""]
    over_all = "; ".join(p for p in parts if p) or "no real difference"
    n_worse = sum(1 for r in slices if r["regression"])
    n_better = sum(1 for r in slices if r["improvement"])
    about = f" ({subject})" if subject else ""
    return f"verdict{about}: over all cases {over_all}. Slices: {n_worse} worse, {n_better} better."


def interval(row: Mapping[str, Any]) -> str:
    """A compare_runs row's per-slice interval, labelled: '95% CI [-0.134, -0.036]' (or '95% CI unbounded')."""
    level = f"{100 * row.get('level', 0.95):g}% CI"  # the comparison's level (1 - alpha), 95% by default
    if row["ci_low"] is None or row["ci_high"] is None:
        return f"{level} unbounded"
    return f"{level} [{row['ci_low']:+.3f}, {row['ci_high']:+.3f}]"


META_DIMENSION = re.compile(r"meta\.[A-Za-z0-9_-]{1,64}")  # an eval file's `slices:` key: a golden case's metadata


def check_dimension(by: str, allowed: Sequence[str] = DIMENSIONS) -> str:
    """A dimension to break results down by: a built-in one, or `meta.KEY` for a metadata key a run's eval
    file named in `slices:` (a run without that key has no such slice)."""
    if by not in allowed and not META_DIMENSION.fullmatch(by):
        raise UnknownNameError("dimension", by, [*allowed, "meta.KEY"])
    return by


SELECTOR = re.compile(r"latest(?:~([0-9]+))?")  # exactly `latest` or `latest~N`; anything else names a run


def is_selector(spec: str) -> bool:
    """Whether `spec` picks a run by its age (`latest`, `latest~N`) rather than naming one."""
    return SELECTOR.fullmatch(spec) is not None


def missing_lake(lake: Lake) -> LakeError | None:
    """The error for reading a lake that is not there (a mistyped --lake would otherwise print no rows), or None."""
    if lake.exists():
        return None
    return LakeError(
        f"no lake at {lake.url} (no runs/ folder there): point --lake or $RAGLAKE_LAKE at an existing lake, "
        f"or make one with `raglake run --lake {lake.url}`"
    )


def resolve_run(con: duckdb.DuckDBPyConnection, spec: str, lake: Lake | None = None) -> str:
    """'latest', 'latest~1' (the one before), a full run id or an unambiguous prefix of one. Only those
    two forms are selectors: `latest0` or `latest-x` is a run id (or a prefix of one) like any other.
    With `lake`, a lake that is not there says so."""
    runs = [r[0] for r in fetch(con, "SELECT run_id FROM run_order ORDER BY newest_rank")]
    if not runs:
        missing = missing_lake(lake) if lake is not None else None
        if missing is not None:
            raise missing
        raise ConfigError("the lake has no runs yet; start with `raglake run`")
    selector = SELECTOR.fullmatch(spec)
    if selector:
        back = int(selector.group(1) or 0)
        if back >= len(runs):
            raise ConfigError(f"{spec!r}: the lake holds {len(runs)} run(s)")
        return runs[back]
    if spec in runs:
        return spec
    matches = [r for r in runs if r.startswith(spec)]
    if len(matches) == 1:
        return matches[0]
    if len(matches) > 1:
        raise ConfigError(f"run prefix {spec!r} is ambiguous: {', '.join(matches[:5])}")
    raise UnknownNameError("run", spec, runs)


def latest_per_target(con: duckdb.DuckDBPyConnection) -> list[str]:
    rows = fetch(con, "SELECT run_id FROM run_order WHERE newest_rank_in_target = 1 ORDER BY target_name")
    return [r[0] for r in rows]


def _check_alpha(alpha: float) -> None:
    if not 0 < alpha < 1:
        raise ConfigError(f"alpha must lie between 0 and 1, got {alpha}")


def _check_bootstrap(n_boot: int, alpha: float) -> None:
    if n_boot < 100:
        raise ConfigError(f"n_boot must be at least 100 for a 95% interval, got {n_boot}")
    _check_alpha(alpha)


class LakeQueries:
    """One DuckDB connection over one lake, and the project's questions as methods. `registry` is the
    metric registry's table (the `metric_registry` view); raglake.pipeline.lakes.open_lake builds both."""

    def __init__(self, lake: Lake, registry: pa.Table, *, memory_limit: str | None = None):
        self.lake = lake
        self.con = connect(lake, registry, memory_limit=memory_limit)

    def close(self) -> None:
        """Close the connection (and remove what DuckDB spilled, if anything); its questions fail after."""
        self.con.close()

    def __enter__(self) -> LakeQueries:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def run_ids(self, specs: Sequence[str]) -> list[str]:
        return list(dict.fromkeys(resolve_run(self.con, s, self.lake) for s in specs))

    def runs(self, limit: int = 50) -> list[dict[str, Any]]:
        return run_query(self.con, "runs", limit=limit).to_pylist()

    def breakdown(self, run_ids: Sequence[str], by: str = "all") -> list[dict[str, Any]]:
        return run_query(self.con, "breakdown", run_ids=list(run_ids), dimension=check_dimension(by)).to_pylist()

    def figures(self, run_ids: Sequence[str]) -> list[dict[str, Any]]:
        return run_query(self.con, "run_figures", run_ids=list(run_ids), target_stages=list(LATENCY_STAGES)).to_pylist()

    def capture_health(self, run_ids: Sequence[str], by: str = "all") -> list[dict[str, Any]]:
        return run_query(self.con, "capture_health", run_ids=list(run_ids), dimension=check_dimension(by)).to_pylist()

    def compare(
        self,
        run_a: str,
        run_b: str,
        *,
        alpha: float = 0.05,
        min_pairs: int = 5,
        fdr: float | None = DEFAULT_FDR,
        tests: Sequence[Mapping[str, Any]] | None = None,
    ) -> list[dict[str, Any]]:
        """Run B against run A for every metric and slice: per-slice test and interval, and verdicts
        with the false discovery rate controlled at `fdr` (None: off) across the tested rows (every
        row with a direction and `min_pairs` pairs, or only those `tests` lists as {metric, dimension,
        min_pairs}); see sql/compare_runs.sql."""
        _check_alpha(alpha)
        if min_pairs < 1:
            raise ConfigError(f"min_pairs must be at least 1, got {min_pairs}")
        return run_query(
            self.con,
            "compare_runs",
            run_a=run_a,
            run_b=run_b,
            alpha=alpha,
            min_pairs=min_pairs,
            fdr=parse_fdr(fdr),
            tests=None if tests is None else [dict(t) for t in tests],
        ).to_pylist()

    def scored_metrics(self, run_ids: Sequence[str]) -> list[str]:
        """The metrics with `ok` scores in any of the runs, by name."""
        sql = "SELECT DISTINCT metric FROM scores_latest WHERE list_contains($ids, run_id) AND status = 'ok'"
        return sorted(r[0] for r in fetch(self.con, sql, ids=list(run_ids)))

    def metric_ci(
        self, run_id: str, by: str = "all", *, n_boot: int = 1000, seed: int = 0, alpha: float = 0.05
    ) -> list[dict[str, Any]]:
        """n, mean and a bootstrap CI of every case-level metric of one run by slice; see sql/metric_ci.sql."""
        _check_bootstrap(n_boot, alpha)
        by = by if by == "any" else check_dimension(by)
        return run_query(self.con, "metric_ci", run_id=run_id, by=by, n_boot=n_boot, seed=seed, alpha=alpha).to_pylist()

    def check_metrics(self, names: Sequence[str]) -> None:
        """Every name is a case-level metric of the registry or one the lake's scores hold (a metric
        since renamed); otherwise UnknownNameError with the closest name."""
        known = {r[0] for r in fetch(self.con, "SELECT metric FROM metric_registry WHERE level = 'case'")}
        unknown = [n for n in names if n not in known]
        if unknown:
            known |= {r[0] for r in fetch(self.con, "SELECT DISTINCT metric FROM scores")}
            for name in unknown:
                if name not in known:
                    raise UnknownNameError("metric", name, known)

    def check_target(self, target: str) -> None:
        """A target name the lake's runs hold (what `raglake runs` shows)."""
        known = [r[0] for r in fetch(self.con, "SELECT DISTINCT target_name FROM runs")]
        if target not in known:
            raise UnknownNameError("target", target, known)

    def trend(
        self, metric: str | None = None, target: str | None = None, dataset: str | None = None, by: str = "all"
    ) -> list[dict[str, Any]]:
        if metric is not None:
            self.check_metrics([metric])
        if target is not None:
            self.check_target(target)
        return run_query(
            self.con, "trend", metric=metric, target=target, dataset=dataset, dimension=check_dimension(by)
        ).to_pylist()

    def coverage(self, run_id: str) -> list[dict[str, Any]]:
        return run_query(self.con, "coverage", run_id=run_id).to_pylist()

    def previous_run(self, run_id: str) -> str | None:
        rows = run_query(self.con, "previous_run", run_id=run_id).to_pylist()
        return rows[0]["run_id"] if rows else None

    def index_versions(self, run_ids: Sequence[str]) -> dict[str, str | None]:
        rows = fetch(
            self.con, "SELECT run_id, index_version FROM runs WHERE list_contains($ids, run_id)", ids=list(run_ids)
        )
        return dict(rows)

    def target_name(self, run_id: str) -> str:
        name = scalar(self.con, "SELECT target_name FROM runs WHERE run_id = $r", r=run_id)
        return name or run_id
