"""raglake's embedding stage and vector metrics on a GPU against sentence-transformers' raw encode (issue 29,
item 3), made to run on a lent machine that has torch and sentence-transformers but not raglake's model
package, Prefect or DuckDB (the code path below needs neither).

    python benchmarks/gpu_embedding.py [--device cuda] [--cases 20000] [--repeat 5]
        [--model-dir .gpumodel] [--random-weights] [--metrics a,b] [--cli N] [--json FILE]

Inputs: --cases golden cases and captures of the sample style (benchmarks/embedding_inputs.py, seeded),
staged as the flow stages them: canonical JSON lines (models' dumps) in batches of the flow's automatic
batch size (raglake.pipeline.settings.auto_batch_size: 1,000 cases for 20,000). Metrics: the built-in
ones that read the run's vector table (declare `texts=`), as a run with no --metrics computes them.
With --repeat R, (a), (a') and (b)+(c) run R times, interleaved (the order rotating); best and median shown:
  (a) raw: `SentenceTransformer.encode(distinct, batch_size=64, normalize_embeddings=True)` of the
      distinct texts (b) collects, the model object raglake itself uses on the device;
  (a') the same raw encode at the embedder's own batch size on the device (Embedder.batch_size: 256 off the
      cpu), like for like with (b)'s model call;
  (b) the embedding stage, as the flow's embed-texts task runs it (tasks/embed.py): the staged files read
      as columns and `collect_batch_texts`, then one `TextEncoder.encode` through an empty in-memory
      `EmbeddingCache` (each run starts without memoised sentence splits or text keys, as a process does);
      goal: throughput (b) >= 0.8x (a), i.e. (a) s / (b) s >= 0.8;
  (c) the scoring stage, as the score-batch task runs it (tasks/score.py): each batch read with
      `ColumnarBatch.from_files(canonical=True)` and `score_columnar(...).tables()` with that encoder (every
      vector in memory); split into reading, the batch's vector table (`prepare_embeddings`, timed through
      a wrapper), the metrics' columnar forms and per-case functions (timed through wrappers, per metric) and the rest
      (each row's models, Arrow tables). Staging the scored tables (Parquet) is not timed.
--cli N: then `raglake run` itself on the same inputs and model, N times (benchmarks/gpu_embedding_cli.py).
The model (--model-dir): a folder packed by benchmarks/gpu_model.py (weights rounded to float16 to travel,
widened back to float32 here, checked against the float32 model's vectors of a few texts) or any
sentence-transformers folder; --random-weights: random float32 weights of the same architecture.
The table goes to stdout; the figures as JSON to --json, else $OUT/gpu_embedding.json when $OUT is set.
Asking for cuda where torch sees none exits 2 at once. Nothing here asserts on time."""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

from _common import ROOT

sys.path.insert(0, str(ROOT))

import pyarrow as pa  # noqa: E402
from embedding_inputs import load_inputs  # noqa: E402
from gpu_embedding_cli import cli_lines, run_cli  # noqa: E402
from gpu_model import materialise, reference_check  # noqa: E402
from gpu_report import metric_values, report_lines, summarise  # noqa: E402

from raglake.columnar.batch import ColumnarBatch  # noqa: E402
from raglake.embed.cache import EmbeddingCache, TextEncoder, text_key  # noqa: E402
from raglake.embed.encoders import get_embedder  # noqa: E402
from raglake.embed.model import DEVICES, offline_environment, resolve_device  # noqa: E402
from raglake.embed.texts import collect_batch_texts  # noqa: E402
from raglake.errors import ConfigError  # noqa: E402
from raglake.metrics.context import ScoringConfig  # noqa: E402
from raglake.metrics.registry import get_metric, select_metrics  # noqa: E402
from raglake.pipeline import scoring  # noqa: E402
from raglake.schemas import Capture, GoldenCase  # noqa: E402
from raglake.text import sentences, words  # noqa: E402


def auto_batch_size(n_cases: int, given: int | None) -> int:
    """raglake.pipeline.settings.auto_batch_size (n/20 between 100 and 5,000), copied: that module imports
    DuckDB (through raglake.analysis), which the lent machine lacks and this path does not use."""
    return given if given is not None else max(100, min(5000, -(-n_cases // 20)))


def check_device(name: str) -> str:
    """The resolved device, or exit 2 with torch's view of the machine (before anything slow)."""
    try:
        device = resolve_device(name)
    except ConfigError as e:
        print(f"gpu_embedding: --device {name}: {e}", file=sys.stderr, flush=True)
        sys.exit(2)
    if device == "cuda":
        import torch

        try:
            torch.zeros(1, device="cuda")  # the driver answers here, not minutes later
        except RuntimeError as e:
            print(f"gpu_embedding: --device cuda: torch sees a device but cannot use it: {e}", file=sys.stderr)
            sys.exit(2)
    return device


def environment(device: str, embedder) -> dict:  # noqa: ANN001 - raglake.embed.model.Embedder
    import sentence_transformers
    import tokenizers
    import torch
    import transformers

    model = embedder.model
    first = next(model.parameters())
    return {
        "device": device,
        "device_name": torch.cuda.get_device_name() if device == "cuda" else platform.processor() or "cpu",
        "torch": torch.__version__,
        "torch_cuda": torch.version.cuda,
        "sentence_transformers": sentence_transformers.__version__,
        "transformers": transformers.__version__,
        "tokenizers": tokenizers.__version__,
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "tokenizers_parallelism": os.environ.get("TOKENIZERS_PARALLELISM"),
        "param_dtype": str(first.dtype),
        "param_device": str(first.device),
        "max_seq_length": embedder.max_sequence,
        "dimension": _dimension(embedder),
        "encode_batch_size": embedder.batch_size,
    }


def _dimension(embedder) -> int | str:  # noqa: ANN001
    """The embedder's dimension (the figures must not be lost to an API another sentence-transformers lacks)."""
    try:
        return embedder.dimension
    except AttributeError as e:
        return f"n/a ({e})"


def stage_inputs(embedder, args, folder: Path) -> tuple[list[tuple[Path, Path]], dict]:  # noqa: ANN001
    """The cases and captures written as the flow stages them; (file pairs, what they hold)."""
    cases, captures, golden, chunks, available = load_inputs(
        embedder, args.cases, args.chunks, args.seed, args.distinct_chunks
    )
    size = auto_batch_size(len(cases), args.batch_size)
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for index, start in enumerate(range(0, len(cases), size)):
        pair = (folder / f"cases-{index:05d}.jsonl", folder / f"captures-{index:05d}.jsonl")
        for path, rows, model in zip(pair, (cases, captures), (GoldenCase, Capture)):
            lines = (model.model_validate(r).model_dump_json() + "\n" for r in rows[start : start + size])
            path.write_text("".join(lines), encoding="utf-8")
        paths.append(pair)
    held = {"cases": len(cases), "chunks_per_case": args.chunks, "seed": args.seed, "batch_size": size}
    held |= {
        "batches": len(paths),
        "sample_golden": len(golden),
        "corpus_chunks": available,
        "chunks_used": len(chunks),
    }
    return paths, held


def forget_memos() -> None:
    """Start as a fresh process does: no memoised sentence splits, content words or text keys."""
    sentences.clear_memo()
    words.clear_memo()
    text_key.cache_clear()


def embed_stage(paths, embedder, metrics, k: int) -> dict:  # noqa: ANN001
    """(b): what tasks/embed.py does, timed in its two parts."""
    forget_memos()
    t0 = time.perf_counter()
    columns = (ColumnarBatch.from_files(c, x, canonical=True) for c, x in paths)
    texts = collect_batch_texts(columns, k, metrics)
    t1 = time.perf_counter()
    encoder = TextEncoder(embedder, EmbeddingCache(None, embedder.key, embedder.device))
    encoder.encode(texts, caller="metrics")
    t2 = time.perf_counter()
    stats = encoder.stats
    return {
        "collect": t1 - t0,
        "encode": t2 - t1,
        "total": t2 - t0,
        "model_call": stats.seconds_encoding,
        "texts": len(texts),
        "encoded": stats.encoded,
        "encoder": encoder,
        "distinct": texts,
    }


class Timed:
    """A function that adds its calls' time to `seconds`."""

    def __init__(self, fn) -> None:  # noqa: ANN001
        self.fn, self.seconds, self.calls = fn, 0.0, 0

    def __call__(self, *args, **kwargs):  # noqa: ANN002, ANN003, ANN204
        t0 = time.perf_counter()
        try:
            return self.fn(*args, **kwargs)
        finally:
            self.seconds += time.perf_counter() - t0
            self.calls += 1


def score_stage(paths, metrics, config, encoder, keep_scores: bool = False) -> dict:  # noqa: ANN001
    """(c): what tasks/score.py does with each batch up to its tables, timed in parts."""
    fns = {m.name: Timed(m.fn) for m in metrics}
    forms = {m.name: Timed(m.columnar) for m in metrics if m.columnar is not None}
    timed = [dataclasses.replace(m, fn=fns[m.name], columnar=forms.get(m.name)) for m in metrics]
    prepare = scoring.prepare_embeddings
    scoring.prepare_embeddings = vectors = Timed(prepare)
    read = score = 0.0
    tables = []
    try:
        for cases_path, captures_path in paths:
            t0 = time.perf_counter()
            batch = ColumnarBatch.from_files(cases_path, captures_path, canonical=True)
            t1 = time.perf_counter()
            scored = scoring.score_columnar(batch, timed, config, encoder=encoder).tables()
            t2 = time.perf_counter()
            read, score = read + t1 - t0, score + t2 - t1
            if keep_scores:
                tables.append(scored["scores"])
    finally:
        scoring.prepare_embeddings = prepare
    metric_s = sum(f.seconds for f in fns.values())
    form_s = sum(f.seconds for f in forms.values())
    return {
        "read": read,
        "score_columnar": score,
        "total": read + score,
        "vector_table": vectors.seconds,
        "metric_functions": metric_s,
        "columnar_forms": form_s,
        "rest": score - vectors.seconds - metric_s - form_s,
        "per_metric": {name: f.seconds + (forms[name].seconds if name in forms else 0.0) for name, f in fns.items()},
        "scores": pa.concat_tables(tables) if tables else None,
    }


def raw_encode(embedder, texts: list[str], batch_size: int = 64) -> float:  # noqa: ANN001
    t0 = time.perf_counter()
    model = embedder.sentence_transformer
    model.encode(texts, batch_size=batch_size, normalize_embeddings=True, show_progress_bar=False)
    if embedder.device == "cuda":
        import torch

        torch.cuda.synchronize()
    return time.perf_counter() - t0


def warm_up(paths, embedder, metrics, config) -> list[str]:  # noqa: ANN001
    """The model's kernels, the tokenizer and every import on the path, on the first batch; its texts."""
    first = embed_stage(paths[:1], embedder, metrics, config.k)
    raw_encode(embedder, first["distinct"][:512])
    raw_encode(embedder, first["distinct"][:512], embedder.batch_size)
    score_stage(paths[:1], metrics, config, first["encoder"])
    return first["distinct"]


def measure(paths, embedder, metrics, config, repeat: int) -> dict:  # noqa: ANN001
    """(a), (b) and (c) `repeat` times, interleaved; (c) follows its (b), as the flow's scoring follows its
    embedding, on the encoder (b) filled."""
    import torch

    runs: dict[str, list] = {"raw": [], "raw_own": [], "embed": [], "score": []}
    columns = (ColumnarBatch.from_files(c, x, canonical=True) for c, x in paths)
    distinct = collect_batch_texts(columns, config.k, metrics)  # what (a) encodes: the texts (b) collects
    order = ("raw", "raw_own", "flow")
    for rep in range(repeat):
        for which in order[rep % 3 :] + order[: rep % 3]:
            if which == "raw":
                runs["raw"].append(raw_encode(embedder, distinct))
            elif which == "raw_own":
                runs["raw_own"].append(raw_encode(embedder, distinct, embedder.batch_size))
            else:
                embed = embed_stage(paths, embedder, metrics, config.k)
                runs["score"].append(score_stage(paths, metrics, config, embed.pop("encoder"), rep == repeat - 1))
                embed.pop("distinct")
                runs["embed"].append(embed)
            if embedder.device == "cuda":
                torch.cuda.synchronize()
        print(
            f"run {rep + 1}/{repeat}: (a) raw {runs['raw'][-1]:.2f} s, (a') raw at {embedder.batch_size} "
            f"{runs['raw_own'][-1]:.2f} s, (b) embedding stage {runs['embed'][-1]['total']:.2f} s, "
            f"(c) scoring {runs['score'][-1]['total']:.2f} s",
            flush=True,
        )
    sweep = {size: raw_encode(embedder, distinct, size) for size in (32, 64, 128, 256, 512, 1024)}
    print("raw encode by batch size (once each): " + ", ".join(f"{b}: {t:.2f} s" for b, t in sweep.items()), flush=True)
    runs["sweep"] = sweep
    return {"texts": len(distinct), "runs": runs}


def parse(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cuda", choices=DEVICES)
    ap.add_argument("--cases", type=int, default=20_000)
    ap.add_argument("--chunks", type=int, default=5, help="retrieved chunks per capture (and k)")
    ap.add_argument("--seed", type=int, default=20240601)
    ap.add_argument("--distinct-chunks", type=int, default=350, help="distinct chunk texts shared by the cases")
    ap.add_argument("--batch-size", type=int, help="cases per staged batch (default: the flow's automatic size)")
    ap.add_argument("--repeat", type=int, default=5, help="runs of (a) and of (b)+(c), interleaved")
    ap.add_argument("--model-dir", type=Path, default=ROOT / ".gpumodel", help="packed or ordinary model folder")
    ap.add_argument("--random-weights", action="store_true", help="random weights of the folder's architecture")
    ap.add_argument("--metrics", help="comma-separated (default: every built-in metric that reads vectors)")
    ap.add_argument("--cli", type=int, default=0, help="also `raglake run` on the same inputs, this many times")
    ap.add_argument("--json", type=Path, help="where the figures go (default: $OUT/gpu_embedding.json if $OUT)")
    args = ap.parse_args(argv)
    if args.json is None and os.environ.get("OUT"):
        args.json = Path(os.environ["OUT"]) / "gpu_embedding.json"
    return args


def select(names: str | None) -> list:
    if names:
        return [get_metric(n.strip()) for n in names.split(",") if n.strip()]
    return [m for m in select_metrics(None) if m.texts]


def run(args: argparse.Namespace, device: str, folder: Path) -> dict:
    t0 = time.perf_counter()
    weights = materialise(args.model_dir, folder / "all-MiniLM-L6-v2", random=args.random_weights, seed=args.seed)
    embedder = get_embedder(str(folder / "all-MiniLM-L6-v2"), device)
    embedder.load()
    load_s = time.perf_counter() - t0
    encode = embedder.sentence_transformer.encode
    check = (
        None if args.random_weights else reference_check(args.model_dir, lambda t: encode(t, normalize_embeddings=True))
    )
    env = environment(device, embedder)
    print(f"model ready in {load_s:.1f} s on {device}: {weights}; reference check {check}", flush=True)
    print(f"environment: {env}", flush=True)
    t0 = time.perf_counter()
    paths, inputs = stage_inputs(embedder, args, folder / "staged")
    metrics, config = select(args.metrics), ScoringConfig(k=args.chunks)
    print(
        f"{inputs['cases']:,} cases staged in {inputs['batches']} batches in {time.perf_counter() - t0:.1f} s",
        flush=True,
    )
    warm_up(paths, embedder, metrics, config)
    result = measure(paths, embedder, metrics, config, args.repeat)
    figures = {
        "environment": env,
        "model": {"dir": str(args.model_dir), "weights": weights, "key": embedder.key, "load_s": load_s},
        "reference_check": check,
        "inputs": inputs | {"distinct_texts": result["texts"], "repeat": args.repeat},
        "metrics": [m.name for m in metrics],
        "columnar_forms": [m.name for m in metrics if m.columnar is not None],
        "timings": summarise(result),
        "values": metric_values(result["runs"]["score"][-1].pop("scores")),
    }
    for r in result["runs"]["score"]:
        r.pop("scores", None)
    if args.cli:  # after the library path, so its runs do not share the GPU with the CLI's
        names = [m.name for m in metrics]
        figures["cli"] = run_cli(paths, folder / "all-MiniLM-L6-v2", device, names, args.chunks, args.cli)
    if device == "cuda":
        import torch

        figures["environment"]["max_memory_allocated_mib"] = torch.cuda.max_memory_allocated() / 2**20
    return figures


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    device = check_device(args.device)
    offline_environment(device)  # as the embedder sets it on loading: nothing fetched, the tokenizer's threads
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="raglake-gpu-") as tmp:
        figures = run(args, device, Path(tmp))
    figures["wall_s"] = time.perf_counter() - started
    figures["environment"]["load_average"] = os.getloadavg()[0]
    lines = report_lines(figures)
    lines[-1:-1] = cli_lines(figures.get("cli", {}), figures["timings"]["raw"]["best"], len(lines[-1]))
    print("\n".join(lines), flush=True)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(figures, indent=2, default=str) + "\n", encoding="utf-8")
        print(f"figures written to {args.json}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
