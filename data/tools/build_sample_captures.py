#!/usr/bin/env python3
"""Rebuild the sample replay captures from a hand-written plan.

Writes data/captures/basic_search.jsonl and data/captures/local_search.jsonl (one capture per
golden case, in golden-set order) and fills the `answer_sha256` fields of the human labels in
data/golden/sample.jsonl.

Every capture below was planned by hand: which corpus sections are retrieved at which rank with
which score, the answer text, the cited references, the latencies and the status. The section
texts are *not* in this file: they are read from data/corpus, so a retrieved chunk's `text` is
always the exact text of that heading section (heading line plus body up to the next heading of
any level, trimmed). Standard library only; the output is deterministic (run it twice, get the
same bytes).

Usage:  python3 data/tools/build_sample_captures.py [--check]
  --check  exit 1 if any output file would change, without writing.
"""

import hashlib
import json
import os
import sys

DATA = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
GOLDEN = os.path.join(DATA, "golden", "sample.jsonl")
OUT = {
    "basic_search": os.path.join(DATA, "captures", "basic_search.jsonl"),
    "local_search": os.path.join(DATA, "captures", "local_search.jsonl"),
}

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import plan_factual_reasoning  # noqa: E402,F401  (importing a plan module registers its cases)
import plan_general_adversarial  # noqa: E402,F401
import plan_multihop_recency  # noqa: E402,F401
from plan_dsl import PLAN  # noqa: E402
from sections import ref, resolve  # noqa: E402


# --------------------------------------------------------------------------------------------
def build_capture(case_id, method, plan):
    retrieved = []
    for rank, (anchor, score) in enumerate(plan["ret"], 1):
        rel, path, text = resolve(anchor)
        retrieved.append({"rank": rank, "rel_path": rel, "heading_path": path, "text": text, "score": score})
    scores = [r["score"] for r in retrieved]
    assert scores == sorted(scores, reverse=True) and len(set(scores)) == len(scores), (case_id, method)
    lat = plan["lat"]
    fs, ret, gen = lat[:3]
    total = lat[3] if plan["status"] == "error" else fs + ret + gen + lat[3]
    if plan["status"] == "error":
        assert not retrieved and plan["ans"] == "" and not plan["refs"]
    return {
        "case_id": case_id,
        "method": method,
        "status": plan["status"],
        "error": plan["error"],
        "answer": plan["ans"],
        "abstained": plan["abst"],
        "references": [ref(r) for r in plan["refs"]],
        "retrieved": retrieved,
        "latency_ms": {"folder_selection": fs, "retrieval": ret, "generation": gen, "total": total},
        "folder_mode": plan["mode"],
        "selected_folders": plan["folders"],
    }


def sha16(answer):
    return hashlib.sha256(answer.strip().encode("utf-8")).hexdigest()[:16]


def dumps_lines(rows):
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)


def main(argv):
    check = "--check" in argv
    with open(GOLDEN, encoding="utf-8") as f:
        golden = [json.loads(line) for line in f if line.strip()]
    ids = [g["id"] for g in golden]
    if set(ids) != set(PLAN) or len(ids) != len(PLAN):
        missing, extra = sorted(set(ids) - set(PLAN)), sorted(set(PLAN) - set(ids))
        raise SystemExit("plan and golden set differ: missing %s, extra %s" % (missing, extra))
    outputs = {}
    captures = {}
    for method, path in OUT.items():
        rows = [build_capture(cid, method, PLAN[cid][method]) for cid in ids]
        captures[method] = {r["case_id"]: r for r in rows}
        outputs[path] = dumps_lines(rows)
    # Fill the answer hashes of the human labels.
    for g in golden:
        for a in (g.get("labels") or {}).get("answers", []):
            a["answer_sha256"] = sha16(captures[a["method"]][g["id"]]["answer"])
    outputs[GOLDEN] = dumps_lines(golden)
    changed = []
    for path, text in outputs.items():
        old = open(path, encoding="utf-8").read() if os.path.exists(path) else None
        if old != text:
            changed.append(os.path.relpath(path, DATA))
            if not check:
                with open(path, "w", encoding="utf-8", newline="\n") as f:
                    f.write(text)
    if check:
        print("out of date: %s" % ", ".join(changed) if changed else "up to date")
        return 1 if changed else 0
    print("wrote %d captures per method; changed: %s" % (len(ids), ", ".join(changed) or "nothing"))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
