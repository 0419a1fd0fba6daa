"""The figures benchmarks/gpu_embedding.py makes of its runs (best and median, ratios, the last run's values)
and the table it prints of them (the same figures go to its JSON)."""

from __future__ import annotations

import statistics

GOAL = 0.8  # throughput of (b) against (a), at least
W = 104
LIKE = "throughput (b)/(a'), best; medians"
ENCODE_ONLY = "throughput encode only / (a'), best"


def _row(label: str, stat: dict, extra: str = "") -> str:
    return f"{label:<54}{stat['best']:>9.2f} s{stat['median']:>9.2f} s  {extra}"


def _head(f: dict) -> list[str]:
    env, model, inputs = f["environment"], f["model"], f["inputs"]
    check = f["reference_check"]
    checked = (
        f"vectors of {check['texts']} reference texts against the float32 model's (cpu): max 1-cos "
        f"{check['max_one_minus_cos']:.1e}"
        if check
        else "values not checked (random weights, or no reference vectors in the model folder)"
    )
    memory = (
        f", peak GPU memory {env['max_memory_allocated_mib']:,.0f} MiB" if "max_memory_allocated_mib" in env else ""
    )
    return [
        "=" * W,
        "raglake GPU embedding benchmark (issue 29 item 3): embedding stage and vector metrics against the raw encode",
        f"device {env['device']}: {env['device_name']}; torch {env['torch']} (CUDA {env['torch_cuda']}), "
        f"sentence-transformers {env['sentence_transformers']}, transformers {env['transformers']}, "
        f"tokenizers {env['tokenizers']}, python {env['python']}",
        f"{env['cpus']} CPUs, torch threads {env['torch_threads']}, TOKENIZERS_PARALLELISM="
        f"{env['tokenizers_parallelism']}, load average {env['load_average']:.2f} at the end{memory}",
        f"model {model['key']}: {model['weights']}; parameters {env['param_dtype']} on {env['param_device']}, "
        f"max_seq_length {env['max_seq_length']}, dimension {env['dimension']}; loaded in {model['load_s']:.1f} s",
        f"  {checked}",
        f"inputs: {inputs['cases']:,} cases x {inputs['chunks_per_case']} chunks (seed {inputs['seed']}), staged in "
        f"{inputs['batches']} batches of {inputs['batch_size']:,}; {inputs['distinct_texts']:,} distinct texts; "
        f"encode batch size {env['encode_batch_size']} (raw: 64)",
        f"metrics ({len(f['metrics'])}): {', '.join(f['metrics'])}"
        + (f"; with a columnar form: {', '.join(f['columnar_forms'])}" if f["columnar_forms"] else ""),
        "-" * W,
        f"{'':<54}{'best':>11}{'median':>11}  (of {inputs['repeat']} runs each, interleaved)",
    ]


def _stages(f: dict) -> list[str]:
    t, n = f["timings"], f["inputs"]["distinct_texts"]
    e, s = t["embed"], t["score"]
    cases = f["inputs"]["cases"]
    own = f["environment"]["encode_batch_size"]
    lines = [
        _row("(a) raw SentenceTransformer.encode, distinct texts", t["raw"], f"{n / t['raw']['best']:,.0f} texts/s"),
        _row(f"(a') the same at batch size {own}", t["raw_own"], f"{n / t['raw_own']['best']:,.0f} texts/s"),
        _row("(b) embedding stage (embed-texts task)", e["total"], f"{n / e['total']['best']:,.0f} texts/s"),
        _row("    read staged batches + collect_batch_texts", e["collect"]),
        _row("    TextEncoder.encode, empty in-memory cache", e["encode"], f"{n / e['encode']['best']:,.0f} texts/s"),
        _row("      of which the model call (Embedder.encode)", e["model_call"]),
        _row(
            "(c) scoring stage (score-batch task, to its tables)",
            s["total"],
            f"{cases / s['total']['best']:,.0f} cases/s",
        ),
        _row("    ColumnarBatch.from_files", s["read"]),
        _row("    score_columnar(...).tables()", s["score_columnar"]),
        _row("      the batch's vector table (prepare_embeddings)", s["vector_table"]),
        _row("      the metrics' columnar forms", s["columnar_forms"]),
        _row("      per-case functions (rows left to them)", s["metric_functions"]),
        _row("      the rest (models of those rows, Arrow tables)", s["rest"]),
    ]
    for name, stat in t["per_metric"].items():
        lines.append(_row(f"        {name}", stat))
    return lines


def _ratios(f: dict) -> list[str]:
    r = f["timings"]["ratios"]
    met = "met" if r["met"] else "NOT met"
    return [
        "-" * W,
        f"{'throughput (b)/(a) = (a) s / (b) s, best':<54}{r['throughput_b_over_a']:>9.3f}    "
        f"goal >= {r['goal']}: {met}",
        f"{'throughput (b)/(a), medians':<54}{r['throughput_b_over_a_median']:>9.3f}",
        f"{LIKE:<54}{r['b_over_a_own']:>9.3f}; {r['b_over_a_own_median']:.3f}    (the same batch size)",
        f"{ENCODE_ONLY:<54}{r['encode_only_over_a_own']:>9.3f}    (TextEncoder.encode alone)",
        "raw encode by batch size, once each: "
        + ", ".join(f"{b}: {v:.2f} s" for b, v in f["timings"]["sweep"].items()),
        f"{'split of (b)+(c): embedding / scoring':<54}{100 * r['encode_share']:>8.1f}% / "
        f"{100 * r['scoring_share']:.1f}%  (best runs)",
    ]


def _values(f: dict) -> list[str]:
    lines = ["-" * W, f"{'metric (last run)':<30}{'n ok':>8}{'mean':>10}"]
    for name, v in f["values"].items():
        mean = f"{v['mean']:>10.4f}" if v["mean"] is not None else f"{'-':>10}"
        lines.append(f"{name:<30}{v['ok']:>8,}{mean}")
    lines.append(f"whole benchmark {f['wall_s']:.1f} s (model load, inputs, warm-up, {f['inputs']['repeat']} runs)")
    lines.append("=" * W)
    return lines


def report_lines(figures: dict) -> list[str]:
    return _head(figures) + _stages(figures) + _ratios(figures) + _values(figures)


def summarise(result: dict) -> dict:
    """Best and median of every timed part; the ratios."""
    runs = result["runs"]

    def stat(values: list[float]) -> dict:
        return {"best": min(values), "median": statistics.median(values), "runs": values}

    out = {"raw": stat(runs["raw"]), "raw_own": stat(runs["raw_own"]), "sweep": runs["sweep"]}
    for stage in ("embed", "score"):
        keys = [k for k, v in runs[stage][0].items() if isinstance(v, float)]
        out[stage] = {k: stat([r[k] for r in runs[stage]]) for k in keys}
    names = runs["score"][0]["per_metric"]
    out["per_metric"] = {n: stat([r["per_metric"][n] for r in runs["score"]]) for n in names}
    raw, embed, score = out["raw"]["best"], out["embed"]["total"]["best"], out["score"]["total"]["best"]
    out["ratios"] = {
        "throughput_b_over_a": raw / embed,
        "throughput_b_over_a_median": out["raw"]["median"] / out["embed"]["total"]["median"],
        "b_over_a_own": out["raw_own"]["best"] / embed,
        "b_over_a_own_median": out["raw_own"]["median"] / out["embed"]["total"]["median"],
        "encode_only_over_a_own": out["raw_own"]["best"] / out["embed"]["encode"]["best"],
        "goal": GOAL,
        "met": raw / embed >= GOAL,
        "encode_share": embed / (embed + score),
        "scoring_share": score / (embed + score),
    }
    return out


def metric_values(scores) -> dict:  # noqa: ANN001 - the last run's scores table (pyarrow)
    """Per metric: how many cases it scored `ok` and the mean of those values."""
    out: dict[str, dict] = {}
    columns = (scores.column(c).to_pylist() for c in ("metric", "value", "status"))
    for name, value, status in zip(*columns):
        row = out.setdefault(name, {"ok": 0, "sum": 0.0})
        if status == "ok":
            row["ok"] += 1
            row["sum"] += value
    return {n: {"ok": r["ok"], "mean": r["sum"] / r["ok"] if r["ok"] else None} for n, r in sorted(out.items())}
