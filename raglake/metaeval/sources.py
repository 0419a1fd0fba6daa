"""Converters from the public labelled sets in `../shared/metaeval` (their README names each source and
commit; `raglake metaeval --download` fetches the same files, raglake.metaeval.download pins them) to the
labelled-item format (raglake.metaeval.items). Each reads the files as published and
keeps only what people labelled; what is dropped, and why, is said beside each converter and in
docs/metaeval.md. `python data/tools/metaeval_sets.py` writes them as JSONL."""

from __future__ import annotations

import collections
import csv
import hashlib
import json
from collections.abc import Callable, Iterator
from pathlib import Path

from raglake.errors import ConfigError, UnknownNameError
from raglake.metaeval.items import LabelledItem

LFQA_SETS = ("webgpt", "alpaca_wdoc", "alpaca")
EVOUNA_SYSTEMS = ("fid", "gpt35", "chatgpt", "gpt4", "newbing")
RAGCHECKER_ASPECTS = ("correctness", "completeness", "overall")


def lfqa_split(question_id: int) -> str:
    """LFQA-Verification's dev / held-out halves, by question (a question's docs and answers stay on one side):
    the first byte of sha256("lfqa:<id>") even → dev. answer_hallucination's α and θh were chosen on dev."""
    return "dev" if hashlib.sha256(f"lfqa:{question_id}".encode()).digest()[0] % 2 == 0 else "heldout"


def stsb(root: Path) -> Iterator[LabelledItem]:
    """STS-B dev (stsb-multi-mt, English): sentence pairs with a human similarity 0-5."""
    with (root / "stsb" / "stsb-en-dev.csv").open(newline="", encoding="utf-8") as f:
        for i, row in enumerate(r for r in csv.reader(f) if len(r) >= 3):
            yield LabelledItem(
                id=f"stsb-dev-{i:05d}",
                dataset="stsb",
                label_kind="similarity",
                label=float(row[2]),
                answer=row[1],
                reference=row[0],
            )


def _majority(labels: list[str]) -> str | None:
    label, count = collections.Counter(labels).most_common(1)[0]
    return label if count >= 2 else None


def lfqa(root: Path, name: str) -> Iterator[LabelledItem]:
    """LFQA-Verification: answer sentences, 3 annotators each, against the question's retrieved documents.
    Kept: sentences whose majority (2 of 3) says supported or not_supported; `partially` and no-majority
    sentences are dropped. The trailing `</s>` some alpaca answers carry (the model's end token) is removed."""
    base = root / "lfqa_verification"
    docs = {q["question_id"]: q["docs"] for q in json.loads((base / "docs" / "docs-webgpt.json").read_text("utf-8"))}
    for q in json.loads((base / "annotations" / f"annotations-{name}.json").read_text("utf-8")):
        qid = q["question_id"]
        for i, a in enumerate(q["annotations"]):
            label = _majority(a["labels"])
            if label not in ("supported", "not_supported"):
                continue
            yield LabelledItem(
                id=f"lfqa-{name}-{qid}-{i}",
                dataset=f"lfqa_{name}",
                label_kind="support",
                label=label,
                answer=a["answer"].replace("</s>", "").strip(),
                question=q["question"],
                contexts=[d["text"] for d in docs[qid]],
                group=f"{name}-{qid}",
                split=lfqa_split(qid),
                meta={"question_id": qid, "sentence": i, "labels": a["labels"]},
            )


def wice(root: Path) -> Iterator[LabelledItem]:
    """WiCE dev, claim level, with the first of each claim's oracle chunks as the one context (its evidence
    sentences, one a paragraph). partially_supported counts as not_supported: part of the claim has no
    support, which is what a hallucination detector should flag (the original label stays in `meta`)."""
    seen: set[str] = set()
    with (root / "wice" / "oracle_chunks_dev.jsonl").open(encoding="utf-8") as f:
        for line in f:
            row = json.loads(line)
            cid = row["meta"]["id"]
            if cid in seen:
                continue
            seen.add(cid)
            yield LabelledItem(
                id=f"wice-{cid}",
                dataset="wice",
                label_kind="support",
                label="supported" if row["label"] == "supported" else "not_supported",
                answer=row["claim"],
                question=row["meta"].get("claim_title") or "",
                contexts=["\n\n".join(row["evidence"])],
                meta={"label": row["label"]},
            )


def evouna(root: Path) -> Iterator[LabelledItem]:
    """EVOUNA NQ: five systems' answers, judged true/false by people against the gold answers ('/'-separated,
    kept as given). Dropped: questions flagged improper and answers whose judgement is null or "nan"."""
    for i, q in enumerate(json.loads((root / "evouna" / "NQ.json").read_text("utf-8"))):
        if q.get("improper") is True:
            continue
        for system in EVOUNA_SYSTEMS:
            verdict = q.get(f"judge_{system}")
            if not isinstance(verdict, bool) or not (q.get(f"answer_{system}") or "").strip():
                continue
            yield LabelledItem(
                id=f"evouna-nq-{i}-{system}",
                dataset="evouna_nq",
                label_kind="correctness",
                label="correct" if verdict else "wrong",
                answer=q[f"answer_{system}"],
                question=q["question"],
                reference=q["golden_answer"],
                group=f"nq-{i}",
                meta={"system": system},
            )


def ragchecker(root: Path, aspect: str) -> Iterator[LabelledItem]:
    """RAGChecker's human meta-evaluation: 280 pairs of answers, each rated by 2 annotators from −2 to 2 on
    correctness, completeness and overall (positive: model2's answer is better). One item per annotation,
    as the published correlations are computed; a pair's two annotations move together in the bootstrap."""
    seen: collections.Counter = collections.Counter()
    for row in json.loads((root / "ragchecker_meta_eval" / "human_labeled_data.json").read_text("utf-8")):
        n = row["instance_id"]
        seen[n] += 1  # the file does not name its annotators: a1, a2 in file order
        yield LabelledItem(
            id=f"rc-{n}-a{seen[n]}",
            dataset=f"ragchecker_{aspect}",
            label_kind="preference",
            label=float(row[f"{aspect}_label"]),
            answer=row["model1"]["response"],
            answer_b=row["model2"]["response"],
            question=row["query"],
            reference=row["gt_answer"],
            group=f"rc-{n}",
            meta={
                "source_dataset": row["dataset"],
                "models": [row["model1"]["model_name"], row["model2"]["model_name"]],
            },
        )


# data set name -> its converter; every one of them reads `root` (the shared metaeval folder)
SOURCES: dict[str, Callable[[Path], Iterator[LabelledItem]]] = {
    "stsb": stsb,
    **{f"lfqa_{name}": (lambda root, name=name: lfqa(root, name)) for name in LFQA_SETS},
    "wice": wice,
    "evouna_nq": evouna,
    **{f"ragchecker_{a}": (lambda root, a=a: ragchecker(root, a)) for a in RAGCHECKER_ASPECTS},
}


def convert(root: str | Path, names: list[str] | None = None) -> dict[str, list[LabelledItem]]:
    """The named data sets (all by default) from the shared folder, as labelled items."""
    root = Path(root)
    if not root.is_dir():
        raise ConfigError(
            f"no labelled data at {root}: `raglake metaeval --download` fetches the public sets, or give --source "
            "DIR (a folder laid out as the download, e.g. a checkout's ../shared/metaeval) or --data FILE.jsonl "
            "(labelled items, docs/metaeval.md)"
        )
    out = {}
    for name in names or list(SOURCES):
        if name not in SOURCES:
            raise UnknownNameError("data set", name, SOURCES)
        out[name] = list(SOURCES[name](root))
    return out
