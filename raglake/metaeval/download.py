"""`raglake metaeval --download`: the public labelled sets fetched by pinned commit, each file checked
against its pinned sha256 before it is written, into a folder laid out as `../shared/metaeval` (so
`--source` reads either). Nothing downloads unless asked: a meta-evaluation without data says what to
pass. Every URL and digest lives in PINNED, here and nowhere else.

A file is held in memory (the largest is 3.6 MB), its size capped by raglake.httpedge (no redirect
followed), its sha256 compared with the pin, and only then written, whole or not at all
(raglake.outputs: a temporary file beside it, then a rename); a file already there with the pinned
digest is kept. `--mirror URL` fetches `URL/<path>` instead (a copy of the folder on any HTTP server: an
air-gapped mirror, or the tests' local server), checked against the same digests."""

from __future__ import annotations

import asyncio
import hashlib
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import httpx

from raglake import outputs
from raglake.errors import ConfigError
from raglake.httpedge import ResponseTooLarge, capped_client, redirect_message
from raglake.redact import Redactor

TIMEOUT_S = 60.0  # one file's whole download


@dataclass(frozen=True)
class PinnedFile:
    """One file of a public set: where it lies in the folder, where it comes from, what it must hash to."""

    path: str  # relative to the folder (as in ../shared/metaeval)
    repo: str  # owner/name on GitHub
    commit: str
    source_path: str  # in the repository
    size: int
    sha256: str
    datasets: tuple[str, ...]  # the data sets (raglake.metaeval.sources) whose converter reads it

    @property
    def url(self) -> str:
        return f"https://raw.githubusercontent.com/{self.repo}/{self.commit}/{self.source_path}"


STSB = ("PhilipMay/stsb-multi-mt", "30de0dec4ee199b7f42351d3f1a0b19592955385")
LFQA = ("timchen0618/LFQA-Verification", "4e905be93fbe919082d62faa77ee32c68e90237c")
WICE = ("ryokamoi/wice", "ddeb6c183665e2a20c5f03c5aa07f03888b9870f")
# ../shared/metaeval/README.md names QA-Eval @ 90007d39; this is the commit the file's copy here was matched
# against (same length, same text)
EVOUNA = ("wangcunxiang/QA-Eval", "5e82f3cb5b7e9a583803e4fc6fe4b5c794f74024")
RAGCHECKER = ("amazon-science/RAGChecker", "6091f08c00e676e87a970f2aeb4a23a484746348")
LFQA_ALL = ("lfqa_webgpt", "lfqa_alpaca_wdoc", "lfqa_alpaca")
RAGCHECKER_ALL = ("ragchecker_correctness", "ragchecker_completeness", "ragchecker_overall")

PINNED: tuple[PinnedFile, ...] = (
    PinnedFile(
        "stsb/stsb-en-dev.csv",
        *STSB,
        "data/stsb-en-dev.csv",
        204675,
        "d29586e96558c4eb52cf5ea5d14e9c24d3bf0e44f111b017caba43a5adc33226",
        ("stsb",),
    ),
    PinnedFile(
        "lfqa_verification/docs/docs-webgpt.json",
        *LFQA,
        "data/docs/docs-webgpt.json",
        798880,
        "bca08af7ab7fa8062929387b16d33fd7609b3739db1dab4935e376437332387b",
        LFQA_ALL,
    ),
    PinnedFile(
        "lfqa_verification/annotations/annotations-webgpt.json",
        *LFQA,
        "data/annotations/annotations-webgpt.json",
        330680,
        "00d80e806d1d3428dad9e3c363f48f1c69df0b0553f1d0ab1660e517cbb52942",
        ("lfqa_webgpt",),
    ),
    PinnedFile(
        "lfqa_verification/annotations/annotations-alpaca_wdoc.json",
        *LFQA,
        "data/annotations/annotations-alpaca_wdoc.json",
        292674,
        "f2e4e95e1d12c5564bb07195b91fdea96375a9fcc43c0a1ea798f354c8bad61d",
        ("lfqa_alpaca_wdoc",),
    ),
    PinnedFile(
        "lfqa_verification/annotations/annotations-alpaca.json",
        *LFQA,
        "data/annotations/annotations-alpaca.json",
        246530,
        "c3582f7a59e218aa1bcf4a1b7e18ae75f847e3c7e43b7f1b5bc3655f7df2c1a0",
        ("lfqa_alpaca",),
    ),
    PinnedFile(
        "wice/oracle_chunks_dev.jsonl",
        *WICE,
        "code_and_resources/entailment_inputs/oracle_chunks/claim/dev.jsonl",
        2058627,
        "ae33170930d690cb96cd46f097ec5658daaf7fd6700d6d2bf97644e3a8dfb2f9",
        ("wice",),
    ),
    PinnedFile(
        "evouna/NQ.json",
        *EVOUNA,
        "EVOUNA/NQ.json",
        3638758,
        "617c7fd95fe4177f39e2304c943cc0abbdbf539bc8a4fb61aeaef255bed503a1",
        ("evouna_nq",),
    ),
    PinnedFile(
        "ragchecker_meta_eval/human_labeled_data.json",
        *RAGCHECKER,
        "data/meta_evaluation/human_labeled_data.json",
        2347698,
        "42651629afc007396a709c89e89ada3b587e0bcc26246c951225866715e265ce",
        RAGCHECKER_ALL,
    ),
)


def cache_folder() -> Path:
    """Where `--download` writes without `--source`: $XDG_CACHE_HOME/raglake/metaeval, else
    ~/.cache/raglake/metaeval."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "raglake" / "metaeval"


def files_for(datasets: Iterable[str]) -> list[PinnedFile]:
    wanted = set(datasets)
    return [f for f in PINNED if wanted & set(f.datasets)]


def missing(root: Path, datasets: Iterable[str]) -> list[str]:
    """The files the data sets' converters read that `root` lacks."""
    return [f.path for f in files_for(datasets) if not (root / f.path).is_file()]


def _sha256(path: Path) -> str | None:
    try:
        with path.open("rb") as f:
            return hashlib.file_digest(f, "sha256").hexdigest()
    except OSError:
        return None


def _source_of(pinned: PinnedFile, mirror: str | None) -> str:
    return f"{mirror.rstrip('/')}/{pinned.path}" if mirror else pinned.url


async def _fetch(client: httpx.AsyncClient, url: str, pinned: PinnedFile, hide: Redactor) -> bytes:
    """The body of `url`, or a ConfigError naming the file and what went wrong (secrets of the URL hidden)."""

    def failed(why: str) -> ConfigError:
        return ConfigError(hide.error(f"cannot download {pinned.path} from {url}: {why}"))

    try:
        async with asyncio.timeout(TIMEOUT_S):
            response = await client.get(url)
            if response.is_redirect:
                raise failed(redirect_message(response.status_code, response.headers.get("location")))
            if response.status_code != 200:
                raise failed(f"HTTP {response.status_code}")
            return response.content
    except ResponseTooLarge:
        raise failed(f"larger than the pinned file ({pinned.size} bytes)") from None
    except TimeoutError:
        raise failed(f"no complete answer within {TIMEOUT_S:g} s") from None
    except httpx.HTTPError as e:
        offline = "offline? --mirror URL fetches from a copy"
        raise failed(f"{type(e).__name__}: {e or 'no connection'} ({offline})") from None


def _secrets(mirror: str | None) -> Redactor:
    parts = urlsplit(mirror) if mirror else None
    return Redactor([parts.password, parts.username] if parts else [])


async def _download_all(chosen: list[PinnedFile], root: Path, mirror: str | None, say: Callable[[str], None]) -> None:
    hide = _secrets(mirror)
    async with capped_client(max(f.size for f in chosen)) as client:
        for pinned in chosen:
            target = root / pinned.path
            if _sha256(target) == pinned.sha256:
                say(f"{target}: already there (sha256 as pinned)")
                continue
            url = _source_of(pinned, mirror)
            data = await _fetch(client, url, pinned, hide)
            digest = hashlib.sha256(data).hexdigest()
            if digest != pinned.sha256:  # checked before anything is written: a bad file never lands
                raise ConfigError(
                    hide.error(
                        f"{pinned.path} from {url} has sha256 {digest} ({len(data)} bytes), not the pinned "
                        f"{pinned.sha256} ({pinned.size} bytes): nothing of it was written"
                    )
                )
            target.parent.mkdir(parents=True, exist_ok=True)
            with outputs.writing(target, f"the labelled file {pinned.path}") as f:
                f.flush()
                f.buffer.write(data)  # the bytes as fetched (and checked), not re-encoded text
            say(f"{target}: {len(data)} bytes, sha256 as pinned")


def download(
    root: str | Path | None = None,
    mirror: str | None = None,
    datasets: Iterable[str] | None = None,
    say: Callable[[str], None] = lambda _: None,
) -> Path:
    """Fetch the pinned files of `datasets` (all by default) into `root` (default: cache_folder()); returns
    the folder. A file that does not match its pin is an error, and nothing of it is kept."""
    folder = Path(root) if root is not None else cache_folder()
    chosen = files_for(datasets) if datasets else list(PINNED)
    if not chosen:
        raise ConfigError(f"no public data set among {sorted(datasets or [])} to download")
    if mirror is not None and urlsplit(mirror).scheme not in ("http", "https"):
        raise ConfigError(f"--mirror takes an http:// or https:// URL, got {mirror!r}")
    asyncio.run(_download_all(chosen, folder, mirror, say))
    return folder
