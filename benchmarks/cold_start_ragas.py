"""ragas' side of benchmarks/cold_start.py, run by ragas' own interpreter (benchmarks/embedding_ragas.py):
a fresh process that imports ragas, builds its embeddings, evaluates and exits: COLD, nothing warmed up.

    python benchmarks/cold_start_ragas.py ROWS.json MODEL_PATH DEVICE

The rows are raglake's ({id, question, answer, reference, contexts}), renamed to ragas' columns
(user_input, response, retrieved_contexts, reference). The packaged all-MiniLM-L6-v2 is loaded from its
local folder (offline) through langchain-huggingface's HuggingFaceEmbeddings (normalised), wrapped by
ragas' LangchainEmbeddingsWrapper, as benchmarks/embedding_ragas.py does; SemanticSimilarity needs no
LLM, so none is given. One JSON line on stdout: marks in seconds from this script's first line
(`import` done, `model` built, `evaluate` returned), the scores in row order and ragas' version.
"""

import time

T0 = time.perf_counter()

import json  # noqa: E402
import sys  # noqa: E402
import warnings  # noqa: E402
from pathlib import Path  # noqa: E402


def main(argv: list[str]) -> int:
    rows_path, model_path, device = argv
    warnings.filterwarnings("ignore")
    import ragas
    from langchain_huggingface import HuggingFaceEmbeddings
    from ragas import EvaluationDataset, evaluate
    from ragas.embeddings import LangchainEmbeddingsWrapper
    from ragas.metrics import SemanticSimilarity

    marks = {"import": time.perf_counter() - T0}
    rows = json.loads(Path(rows_path).read_text(encoding="utf-8"))
    dataset = EvaluationDataset.from_list(
        [
            {"user_input": r["question"], "response": r["answer"], "reference": r["reference"]}
            | {"retrieved_contexts": r["contexts"]}
            for r in rows
        ]
    )
    hf = HuggingFaceEmbeddings(
        model_name=model_path, model_kwargs={"device": device}, encode_kwargs={"normalize_embeddings": True}
    )
    metric = SemanticSimilarity(embeddings=LangchainEmbeddingsWrapper(hf))
    marks["model"] = time.perf_counter() - T0
    result = evaluate(dataset, metrics=[metric], show_progress=False)
    marks["evaluate"] = time.perf_counter() - T0
    scores = [float(s["semantic_similarity"]) for s in result.scores]
    print(json.dumps({"marks": marks, "scores": scores, "ragas": ragas.__version__}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
