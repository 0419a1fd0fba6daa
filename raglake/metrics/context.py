"""What a case-level metric sees: one golden case, its capture and the run's scoring settings,
with anchor matches and effective labels worked out once per case."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from raglake.anchors import anchor_matches
from raglake.metrics import rules
from raglake.metrics.steps import ABSTENTION, ACKNOWLEDGES_CONFLICT, LABEL_ANSWER, LABEL_CHUNKS
from raglake.schemas import ANSWER_LABELS, CHUNK_LABELS, Capture, ChunkLabel, GoldenCase, RetrievedChunk


@dataclass(frozen=True)
class ScoringConfig:
    """Run settings that change scores; they are part of every cache key and recorded on the run."""

    k: int = 5
    require_snippets: bool = False
    theta_s: float = 0.5  # context_sufficiency: a chunk is sufficient at cos(question, chunk) ≥ θs
    # answer_hallucination: a sentence is unsupported when its support (raglake.metrics.support) < θh; 0.70 was
    # chosen on LFQA-Verification's dev half (docs/metaeval.md)
    theta_h: float = 0.7
    theta_h_chunk_cos: float = 0.4  # answer_hallucination_chunk_cos: unsupported when best cos to a chunk < this
    bertscore_layer: int | None = None  # hidden layer for BERTScore (None: the model's last)
    bertscore_idf: bool = False  # weight BERTScore tokens by idf over the run's references
    # composite weights (run configuration; the defaults are the seeds')
    wp_weights: dict[str, float] = field(
        default_factory=lambda: {
            "correctness": 0.4,
            "faithfulness": 0.2,
            "precision": 0.2,
            "recall": 0.2,
            "relevance": 0.0,
        }
    )
    ragas_weights: dict[str, float] = field(
        default_factory=lambda: {
            "faithfulness": 0.3,
            "context_precision": 0.2,
            "context_recall": 0.2,
            "answer_relevance": 0.3,
        }
    )

    def __post_init__(self) -> None:
        if self.k < 1:
            raise ValueError(f"k must be at least 1, got {self.k}")
        for name in ("theta_s", "theta_h", "theta_h_chunk_cos"):
            if not -1.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"{name} is a cosine threshold in [-1, 1], got {getattr(self, name)}")


@dataclass(frozen=True)
class Label:
    value: int
    source: str


class CaseContext:
    def __init__(
        self,
        case: GoldenCase,
        capture: Capture,
        config: ScoringConfig,
        *,
        known_docs: frozenset[str] = frozenset(),
        judge_labels: dict[str, Label] | None = None,
        embeddings: Any = None,
        judge: dict[str, Any] | None = None,
    ):
        self.case, self.capture, self.config = case, capture, config
        self.known_docs = known_docs  # documents of the target's index manifest, when it has one
        self.embeddings = embeddings  # raglake.pipeline.embedding.EmbeddingInputs of the batch, for embedding metrics
        self.judge = judge  # step name -> raglake.metrics.steps.StepOutcome; None when no judge is configured
        self.judge_labels = judge_labels if judge_labels is not None else self._judge_answer_labels()

    @property
    def k(self) -> int:
        return self.config.k

    def with_config(self, config: ScoringConfig) -> CaseContext:
        """The same case at other scoring settings (a metric variant's, raglake.metrics.variants)."""
        return CaseContext(
            self.case,
            self.capture,
            config,
            known_docs=self.known_docs,
            judge_labels=self.judge_labels,
            embeddings=self.embeddings,
            judge=self.judge,
        )

    @cached_property
    def abstained(self) -> bool:
        """The explicit `abstained` field, else seed 004's uncertainty phrases."""
        return rules.abstained(self.capture)[0]

    @cached_property
    def top(self) -> list[RetrievedChunk]:
        """Ranks 1..K of what the target returned (fewer when it returned fewer)."""
        return self.capture.top_k(self.k)

    @cached_property
    def _supports_by_path(self) -> dict[str, list[int]]:
        by_path: dict[str, list[int]] = {}
        for i, s in enumerate(self.case.gold_supports):
            by_path.setdefault(s.rel_path, []).append(i)
        return by_path

    def supports_matched(self, rel_path: str, segments: tuple[str, ...], text: str | None) -> frozenset[int]:
        """Indexes of the gold supports an anchor matches; with require_snippets a chunk (which has
        text) must also hold one of the support's snippets."""
        found = []
        for i in self._supports_by_path.get(rel_path, ()):
            s = self.case.gold_supports[i]
            if anchor_matches(
                rel_path,
                segments,
                s.rel_path,
                s.heading_path,
                chunk_text=text,
                snippets=s.snippets,
                require_snippets=self.config.require_snippets and text is not None,
            ):
                found.append(i)
        return frozenset(found)

    @cached_property
    def chunk_matches(self) -> list[frozenset[int]]:
        """For every retrieved chunk (beyond K too), the gold supports it matches."""
        return [self.supports_matched(c.rel_path, c.heading_path, c.text) for c in self.capture.retrieved]

    @property
    def matches(self) -> list[frozenset[int]]:
        """For each top-K chunk, the indexes of the gold supports it matches (top-K is a prefix of
        the rank-sorted retrieved list)."""
        return self.chunk_matches[: len(self.top)]

    def reference_matches(self, index: int) -> bool:
        """Does any of the answer's references match gold support `index` (same anchor rule)?

        References carry no text, so the snippet requirement does not apply to them."""
        return any(index in self.supports_matched(r.rel_path, r.heading_path, None) for r in self.capture.references)

    @cached_property
    def chunk_labels(self) -> list[ChunkLabel | None]:
        """For each top-K chunk, the most specific human chunk label whose anchor it lies under."""
        labels = self.case.labels.chunks if self.case.labels else []
        out: list[ChunkLabel | None] = []
        for c in self.top:
            found = [
                lab for lab in labels if anchor_matches(c.rel_path, c.heading_path, lab.rel_path, lab.heading_path)
            ]
            out.append(max(found, key=lambda lab: len(lab.heading_path)) if found else None)
        return out

    @cached_property
    def human_answer_labels(self) -> dict[str, Label]:
        """Answer labels from annotations that apply to this method and this exact answer."""
        out: dict[str, Label] = {}
        for entry in self.case.labels.answers if self.case.labels else []:
            if entry.applies_to(self.capture.method, self.capture.answer):
                for name in ANSWER_LABELS:
                    value = getattr(entry, name)
                    if value is not None:
                        out[name] = Label(value, "human")
        return out

    @property
    def annotated(self) -> bool:
        """The case carries human labels of any kind."""
        labels = self.case.labels
        return bool(labels and (labels.chunks or labels.answers))

    def _judge_answer_labels(self) -> dict[str, Label]:
        """Answer labels a judge gave (label_answer, acknowledges_conflict, abstention)."""
        out: dict[str, Label] = {}
        for step in (LABEL_ANSWER, ACKNOWLEDGES_CONFLICT):
            o = (self.judge or {}).get(step.name)
            if o is not None and o.status == "ok":
                for name, value in o.data.items():
                    if name in ANSWER_LABELS and value in (0, 1):
                        out[name] = Label(int(value), f"judge:{o.model}")
        o = (self.judge or {}).get(ABSTENTION.name)
        if o is not None and o.status == "ok":
            out["abstained"] = Label(int(bool(o.data["abstained"])), f"judge:{o.model}")
        return out

    @cached_property
    def judge_chunk_labels(self) -> list[dict[str, Any] | None]:
        """For each top-K chunk, the judge's labels (label_chunks; chunks numbered in rank order), or None."""
        o = (self.judge or {}).get(LABEL_CHUNKS.name)
        if o is None or o.status != "ok":
            return [None] * len(self.top)
        rows = iter(o.data["chunks"])
        return [{**next(rows), "source": f"judge:{o.model}"} if c.text.strip() else None for c in self.top]

    @cached_property
    def effective_chunk_labels(self) -> list[tuple[dict[str, int], str] | None]:
        """For each top-K chunk, its labels and their source: human where given, else the judge's."""
        out: list[tuple[dict[str, int], str] | None] = []
        for human, judged in zip(self.chunk_labels, self.judge_chunk_labels):
            values: dict[str, int] = {}
            sources: set[str] = set()
            for name in CHUNK_LABELS:
                value = getattr(human, name) if human is not None else None
                if value is not None:
                    values[name] = value
                    sources.add("human")
                elif judged is not None:
                    values[name] = int(judged[name])
                    sources.add(judged["source"])
            out.append((values, "+".join(sorted(sources))) if values else None)
        return out

    @cached_property
    def rule_answer_labels(self) -> dict[str, Label]:
        """z, f and d from the deterministic rules of METRICS.md §3."""
        cap = self.capture
        cited = rules.has_citation(cap.answer, cap.references)
        fabricated = rules.fabricated_sources(cap.answer, cap.references, cap.retrieved, self.known_docs)
        proper = rules.observed_action(cap) == self.case.expected_action
        return {
            "source_cited": Label(int(cited), "rule"),
            "fabricated_source": Label(int(bool(fabricated)), "rule"),
            "proper_action": Label(int(proper), "rule"),
        }

    def answer_label(self, name: str) -> Label | None:
        """The effective answer label: human wins, then a judge's, then the deterministic rule."""
        for source in (self.human_answer_labels, self.judge_labels, self.rule_answer_labels):
            if name in source:
                return source[name]
        return None
