"""The converters of the shared labelled sets on small slices written here in each source's own layout,
the labelled-item reader's errors, the fixed-seed sample, and (where ../shared/metaeval is present) the
counts the issue quotes for the real files."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from raglake.errors import ConfigError, InputError
from raglake.metaeval.items import read_items, write_items
from raglake.metaeval.plan import DEFAULT_SOURCE, MetaevalSettings, item_cases, load_sets, sample
from raglake.metaeval.sources import convert, lfqa_split


def _write(path: Path, data: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data), encoding="utf-8")


@pytest.fixture()
def shared(tmp_path: Path) -> Path:
    root = tmp_path / "metaeval"
    (root / "stsb").mkdir(parents=True)
    with (root / "stsb" / "stsb-en-dev.csv").open("w", newline="", encoding="utf-8") as f:
        csv.writer(f).writerows([["A man plays.", "A man is playing.", "4.5"], ["A cat.", "A plane, flying.", "0.2"]])
    _write(
        root / "lfqa_verification" / "docs" / "docs-webgpt.json", [{"question_id": 7, "docs": [{"text": "Doc one."}]}]
    )
    annotations = [
        {
            "question_id": 7,
            "question": "Why?",
            "annotations": [
                {"labels": ["supported", "supported", "not_supported"], "answer": "Because of A."},
                {"labels": ["not_supported", "not_supported", "supported"], "answer": "Also B.</s>"},
                {"labels": ["partially", "partially", "supported"], "answer": "Partly C."},
                {"labels": ["supported", "partially", "not_supported"], "answer": "No majority."},
            ],
        }
    ]
    for name in ("webgpt", "alpaca_wdoc", "alpaca"):
        _write(root / "lfqa_verification" / "annotations" / f"annotations-{name}.json", annotations)
    (root / "wice").mkdir()
    rows = [
        {
            "label": "partially_supported",
            "claim": "X did Y.",
            "evidence": ["X did.", "# Title"],
            "meta": {"id": "dev1"},
        },
        {"label": "partially_supported", "claim": "X did Y.", "evidence": ["Other chunk."], "meta": {"id": "dev1"}},
        {"label": "supported", "claim": "Z.", "evidence": ["Z holds."], "meta": {"id": "dev2", "claim_title": "Zed"}},
    ]
    (root / "wice" / "oracle_chunks_dev.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), "utf-8")
    q = {"question": "who?", "golden_answer": "Ann/Anne", "improper": False}
    q |= {"answer_fid": "Ann", "judge_fid": True, "answer_gpt4": "Bob", "judge_gpt4": False, "answer_gpt35": "x"}
    q |= {"judge_gpt35": None, "answer_chatgpt": "Ann.", "judge_chatgpt": "nan"}
    improper = dict(q, improper=True)
    _write(root / "evouna" / "NQ.json", [q, improper])
    pair = {"instance_id": 3, "dataset": "kiwi", "query": "q?", "gt_answer": "ref"}
    pair |= {"model1": {"model_name": "m1", "response": "a1"}, "model2": {"model_name": "m2", "response": "a2"}}
    labels = [
        dict(pair, correctness_label=1, completeness_label=0, overall_label=2),
        dict(pair, correctness_label=-1, completeness_label=0, overall_label=1),
    ]
    _write(root / "ragchecker_meta_eval" / "human_labeled_data.json", labels)
    return root


def test_each_converter_keeps_what_people_labelled(shared: Path) -> None:
    sets = convert(shared)
    stsb = sets["stsb"]
    assert [(i.answer, i.reference, i.label) for i in stsb] == [
        ("A man is playing.", "A man plays.", 4.5),
        ("A plane, flying.", "A cat.", 0.2),
    ]
    lfqa = sets["lfqa_webgpt"]  # majority of 3; partially and no-majority dropped; the end token removed
    assert [(i.answer, i.label) for i in lfqa] == [("Because of A.", "supported"), ("Also B.", "not_supported")]
    assert {i.group for i in lfqa} == {"webgpt-7"} and {i.split for i in lfqa} == {lfqa_split(7)}
    assert lfqa[0].contexts == ["Doc one."] and lfqa[0].question == "Why?"
    wice = sets["wice"]  # the first oracle chunk per claim; partially_supported counts as not supported
    assert [(i.id, i.label, i.contexts) for i in wice] == [
        ("wice-dev1", "not_supported", ["X did.\n\n# Title"]),
        ("wice-dev2", "supported", ["Z holds."]),
    ]
    assert wice[0].meta == {"label": "partially_supported"}
    evouna = sets["evouna_nq"]  # null / "nan" judgements and improper questions dropped
    assert [(i.answer, i.label, i.reference, i.group) for i in evouna] == [
        ("Ann", "correct", "Ann/Anne", "nq-0"),
        ("Bob", "wrong", "Ann/Anne", "nq-0"),
    ]
    rc = sets["ragchecker_overall"]  # one item per annotation, the pair's annotations in one group
    assert [(i.id, i.label, i.answer, i.answer_b, i.group) for i in rc] == [
        ("rc-3-a1", 2.0, "a1", "a2", "rc-3"),
        ("rc-3-a2", 1.0, "a1", "a2", "rc-3"),
    ]
    assert [i.label for i in sets["ragchecker_correctness"]] == [1.0, -1.0]


def test_items_round_trip_and_bad_lines_name_file_line_field(shared: Path, tmp_path: Path) -> None:
    items = convert(shared, ["lfqa_alpaca"])["lfqa_alpaca"]
    path = tmp_path / "x.jsonl"
    write_items(path, items)
    assert read_items(path) == items
    bad = tmp_path / "bad.jsonl"
    bad.write_text(
        '{"id": "1", "dataset": "d", "label_kind": "support", "label": "supported", "answer": "a"}\n'
        '{"id": "2", "dataset": "d", "label_kind": "support", "label": "suported", "answer": "a"}\n'
    )
    with pytest.raises(InputError, match=r"bad.jsonl:2: field 'label'.*did you mean 'supported'"):
        read_items(bad)
    bad.write_text('{"id": "1", "dataset": "d", "label_kind": "support", "label": "supported", "answr": "a"}\n')
    with pytest.raises(InputError, match=r":1: field 'answr'.*did you mean 'answer'"):
        read_items(bad)
    bad.write_text('{"id": "1", "dataset": "d", "label_kind": "preference", "label": 1, "answer": "a"}\n')
    with pytest.raises(InputError, match="answer_b is given exactly when"):
        read_items(bad)


def test_sample_takes_whole_groups_with_a_fixed_seed(shared: Path) -> None:
    items = convert(shared, ["evouna_nq"])["evouna_nq"] * 1
    many = [i.model_copy(update={"id": f"{i.id}-{n}", "group": f"g{n // 3}"}) for n, i in enumerate(items * 30)]
    taken = sample(many, 10, seed=0)
    assert len(taken) == 12  # 4 groups of 3: whole groups until at least 10 items
    assert taken == sample(many, 10, seed=0) and taken != sample(many, 10, seed=1)
    assert sample(many, None, seed=0) == many


def test_items_sharing_texts_share_a_case(shared: Path) -> None:
    a1, a2 = convert(shared, ["ragchecker_overall"])["ragchecker_overall"]
    assert [c[0] for c in item_cases(a1)] == [c[0] for c in item_cases(a2)]  # 2 annotations, 2 cases
    assert len({c[0] for c in item_cases(a1)}) == 2  # answer and answer_b


def test_unknown_data_set_and_missing_source(shared: Path, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="did you mean 'wice'"):
        load_sets(MetaevalSettings(source=str(shared), datasets=["wise"]))
    with pytest.raises(ConfigError, match="no labelled data at"):
        load_sets(MetaevalSettings(source=str(tmp_path / "nowhere")))


@pytest.mark.skipif(not DEFAULT_SOURCE.is_dir(), reason="../shared/metaeval is not beside the checkout")
def test_the_real_files_give_the_counts_the_issue_quotes() -> None:
    sets = convert(DEFAULT_SOURCE, ["lfqa_alpaca_wdoc", "lfqa_webgpt", "stsb", "ragchecker_correctness"])
    wdoc = sets["lfqa_alpaca_wdoc"]  # "507 majority-labelled sentences, 174 not supported"
    assert (len(wdoc), sum(i.label == "not_supported" for i in wdoc)) == (507, 174)
    assert len(sets["stsb"]) == 1500 and len(sets["ragchecker_correctness"]) == 560
    assert {i.split for i in sets["lfqa_webgpt"]} == {"dev", "heldout"}
