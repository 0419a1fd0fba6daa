"""answer_hallucination against the plain max-cosine baseline on the labelled support sets of
../shared/metaeval (LFQA-Verification's webgpt, alpaca_wdoc and alpaca, and WiCE), per split (dev:
where α and θh were chosen; heldout: never looked at while choosing), with 95% cluster-bootstrap
intervals of each AUROC and of the paired difference (the same resampled answers for both).

    python benchmarks/hallucination_detectors.py [--resamples 1000] [--sets lfqa_webgpt,...] [--cache DIR]

The detectors, all from one scoring of the items through raglake's pipeline (positive: not supported):
  baseline   1 − max cos(sentence, a chunk sentence)    (the sentence_scores table's best_cos)
  v2 score   answer_hallucination_score: 1 − (0.7·that cosine + 0.3·content-word coverage)
  v2 flag    answer_hallucination > 0 at θh = 0.70       (balanced accuracy too)
  v1 flag    answer_hallucination_chunk_cos > 0: best cos to a whole chunk < 0.4
"""

from __future__ import annotations

import argparse
import sys
import time

from _common import ROOT

sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from raglake.columnar.batch import ColumnarBatch  # noqa: E402
from raglake.embed.cache import EmbeddingCache, TextEncoder  # noqa: E402
from raglake.embed.encoders import get_embedder  # noqa: E402
from raglake.metaeval import stats  # noqa: E402
from raglake.metaeval.plan import DEFAULT_SOURCE, item_cases  # noqa: E402
from raglake.metaeval.sources import convert  # noqa: E402
from raglake.metrics.context import ScoringConfig  # noqa: E402
from raglake.metrics.registry import get_metric  # noqa: E402
from raglake.pipeline.scoring import ScoredBatch, score_columnar  # noqa: E402

SETS = ("lfqa_webgpt", "lfqa_alpaca_wdoc", "lfqa_alpaca", "wice")
METRICS = ("answer_hallucination", "answer_hallucination_score", "answer_hallucination_chunk_cos")


def detectors(items: list, encoder: TextEncoder) -> dict[str, np.ndarray]:
    """Per item, each detector's value (higher: less supported)."""
    cases = {cid: (case, cap) for i in items for cid, case, cap in item_cases(i)}
    k = max(len(i.contexts) for i in items)
    scored = ScoredBatch()
    pairs = list(cases.values())
    for start in range(0, len(pairs), 200):
        batch = ColumnarBatch.from_models(pairs[start : start + 200])  # as the score task reads its batch
        scored.extend(score_columnar(batch, [get_metric(m) for m in METRICS], ScoringConfig(k=k), encoder=encoder))
    s = scored.scores
    value = {(c, m): v for c, m, v in zip(s["case_id"], s["metric"], s["value"])}
    sent = scored.sentence_scores
    best: dict[str, float] = {}
    for c, cos in zip(sent["case_id"], sent["best_cos"]):
        best[c] = min(best.get(c, 1.0), cos)  # the item's least supported sentence
    ids = [item_cases(i)[0][0] for i in items]
    return {
        "baseline": np.array([1 - best.get(c, np.nan) for c in ids]),
        "v2 score": np.array([value[c, "answer_hallucination_score"] for c in ids]),
        "v2 flag": np.array([_flag(value[c, "answer_hallucination"]) for c in ids]),
        "v1 flag": np.array([_flag(value[c, "answer_hallucination_chunk_cos"]) for c in ids]),
    }


def _flag(value: float) -> float:
    return value if np.isnan(value) else float(value > 0)


def ci(fn, y, s, groups, resamples) -> str:
    low, high = stats.bootstrap_ci(fn, y, s, groups, resamples, seed=0)
    return f"{fn(y, s):.3f} [{low:.3f}, {high:.3f}]"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--resamples", type=int, default=1000)
    parser.add_argument("--sets", default=",".join(SETS))
    parser.add_argument("--cache", default=None, help="a vector cache folder (e.g. <lake>/_cache/embeddings)")
    args = parser.parse_args()
    embedder = get_embedder()
    encoder = TextEncoder(embedder, EmbeddingCache(args.cache, embedder.key))
    t0 = time.perf_counter()
    sets = convert(DEFAULT_SOURCE, args.sets.split(","))
    print(
        "set / split            n  pos  baseline AUROC         v2 score AUROC         v2 − baseline           "
        "v2 bal. acc            v1 (chunk cos) bal. acc"
    )
    for name, items in sets.items():
        d = detectors(items, encoder)
        for split in ("dev", "heldout", "all"):
            # items a detector leaves undefined (an answer sentence read as an abstention) are left out
            scored = np.isfinite(np.column_stack(list(d.values()))).all(axis=1)
            rows = [n for n, i in enumerate(items) if (split == "all" or i.split == split) and scored[n]]
            if not rows or (split != "all" and all(items[n].split == "all" for n in rows)):
                continue
            y = np.array([items[n].positive for n in rows])
            g = np.array([items[n].cluster for n in rows])
            both = np.column_stack([d["v2 score"][rows], d["baseline"][rows]])

            def diff(yy, ss):
                return stats.auroc(yy, ss[:, 0]) - stats.auroc(yy, ss[:, 1])

            print(
                f"{name + ' / ' + split:<20} {len(rows):>4} {int(y.sum()):>4}  "
                f"{ci(stats.auroc, y, d['baseline'][rows], g, args.resamples):<22} "
                f"{ci(stats.auroc, y, d['v2 score'][rows], g, args.resamples):<22} "
                f"{ci(diff, y, both, g, args.resamples):<23} "
                f"{ci(stats.balanced_accuracy, y, d['v2 flag'][rows], g, args.resamples):<22} "
                f"{ci(stats.balanced_accuracy, y, d['v1 flag'][rows], g, args.resamples)}"
            )
    print(f"({time.perf_counter() - t0:.0f} s; {encoder.stats.encoded} texts encoded; {args.resamples} resamples)")


if __name__ == "__main__":
    main()
