"""The lake and the results location in a bucket of a real S3 API (moto's server on loopback, through s3fs,
behind tests/s3kit.py's fault proxy): every file is written once, straight to its final key (no copy, no
delete, no temp key), created only if absent (S3's If-None-Match, which moto honours), a multipart upload
is seen only once completed, throttling and 500s are retried with no lost or duplicated rows, and a query
on the lake cannot read anything outside it."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import duckdb
import pyarrow as pa
import pytest

from raglake.errors import ConfigError, LakeError, LakeWriteError
from raglake.lake import objects
from raglake.lake.query import connect, run_sql
from raglake.lake.store import Lake
from raglake.lake.tables import TABLES
from raglake.pipeline.lakes import connect_lake
from raglake.pipeline.staging import Store
from raglake.retrying import Backoff
from tests.conftest import FIXTURES
from tests.lakekit import land
from tests.s3kit import FaultProxy, MotoServer, list_keys, make_bucket, multipart_uploads, use_endpoint

GOLDEN, TARGET = str(FIXTURES / "mini_golden.jsonl"), f"replay:{FIXTURES / 'mini_captures.jsonl'}"


@dataclass
class S3:
    moto: MotoServer
    proxy: FaultProxy
    bucket: str

    def keys(self, prefix: str = "") -> list[str]:
        return list_keys(self.moto.url, self.bucket, prefix)


@pytest.fixture(scope="module")
def servers() -> Iterator[tuple[MotoServer, FaultProxy]]:
    with MotoServer() as moto, FaultProxy(moto.url) as proxy:
        yield moto, proxy


@pytest.fixture
def s3(servers, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[S3]:
    """A bucket of its own, this process's s3fs pointed at the proxy, and a clean proxy (no faults)."""
    moto, proxy = servers
    bucket = f"t-{uuid.uuid4().hex[:12]}"
    make_bucket(moto.url, bucket)
    use_endpoint(monkeypatch, proxy.url)
    monkeypatch.setenv("TMPDIR", str(tmp_path))  # a lake file is finished in a local temporary folder
    monkeypatch.setattr("tempfile.tempdir", None)
    proxy.reset()
    proxy.faults, proxy.max_run, proxy.only, proxy.hook, proxy.lose_answer = 0.0, 3, None, None, None
    proxy.no_conditional = False
    yield S3(moto, proxy, bucket)
    proxy.faults, proxy.hook, proxy.lose_answer = 0.0, None, None
    from s3fs import S3FileSystem

    S3FileSystem.clear_instance_cache()


def _score_rows(url: str) -> list[tuple]:
    return connect(Lake(url)).sql("SELECT run_id, case_id, metric, value, status FROM scores ORDER BY ALL").fetchall()


def test_a_run_lands_each_file_once_straight_to_its_key(s3: S3, tmp_path: Path) -> None:
    url = f"s3://{s3.bucket}/raglake"
    land(url, GOLDEN, TARGET, "r-one")
    keys = s3.keys("raglake/")
    assert len(keys) == 8 and "raglake/runs/run_date=2026-01-01/r-one.parquet" in keys
    assert not [k for k in keys if k.rsplit("/", 1)[-1].startswith(".") or k.endswith(".tmp")]
    # one PUT per file: no copy of a temp key, no delete, nothing sent twice
    assert s3.proxy.requests["PutObject"] == len(keys)
    assert s3.proxy.requests["CopyObject"] == 0 and s3.proxy.requests["DeleteObject"] == 0
    fs = Lake(url).fs
    assert s3.proxy.sent_bytes == sum(fs.info(f"{s3.bucket}/{k}")["size"] for k in keys)
    local = str(tmp_path / "local")
    land(local, GOLDEN, TARGET, "r-one")
    assert repr(_score_rows(url)) == repr(_score_rows(local)) and len(_score_rows(url)) > 0  # repr: NaN == NaN
    assert not list(tmp_path.glob("raglake-upload-*"))  # the local temporary folder is gone


def test_a_file_is_created_only_if_absent_and_the_server_refuses_the_second(s3: S3) -> None:
    lake = Lake(f"s3://{s3.bucket}/raglake")
    objects.put_bytes(lake.fs, f"{s3.bucket}/raglake/a.bin", b"one", create=True)
    s3.proxy.reset()
    with pytest.raises(LakeError, match="already exists; the lake is append-only"):
        objects.put_bytes(lake.fs, f"{s3.bucket}/raglake/a.bin", b"two", create=True)
    assert s3.proxy.statuses[412] == 1 and s3.proxy.requests["HeadObject"] == 0  # refused by the server itself
    assert lake.fs.cat(f"{s3.bucket}/raglake/a.bin") == b"one"


def test_a_store_without_conditional_writes_is_guarded_by_an_existence_check(s3: S3) -> None:
    """An S3-compatible store that answers If-None-Match 501 NotImplemented: the write checks, then PUTs."""
    lake, key = Lake(f"s3://{s3.bucket}/raglake"), f"{s3.bucket}/raglake/old.bin"
    s3.proxy.no_conditional = True
    objects.put_bytes(lake.fs, key, b"one", create=True)
    assert lake.fs.cat(key) == b"one" and s3.proxy.requests["PutObject"] == 1
    with pytest.raises(LakeError, match="already exists"):
        objects.put_bytes(lake.fs, key, b"two", create=True)
    assert lake.fs.cat(key) == b"one"


def test_two_writers_of_one_lake_file_exactly_one_wins(s3: S3) -> None:
    lake = Lake(f"s3://{s3.bucket}/raglake")
    part = pa.table({f.name: pa.nulls(1, f.type) for f in TABLES["runs"].schema})
    lake.write("runs", "2026-01-01", part, "r-x")
    with pytest.raises(LakeError, match="already exists"):
        lake.write("runs", "2026-01-01", part, "r-x")
    assert s3.keys("raglake/runs/") == ["raglake/runs/run_date=2026-01-01/r-x.parquet"]


def test_a_lost_answer_to_a_create_is_not_taken_for_another_writer(s3: S3) -> None:
    """The PUT landed but its answer was lost (500): the retry's 412 finds our own bytes there."""
    lake, key = Lake(f"s3://{s3.bucket}/raglake"), f"{s3.bucket}/raglake/lost.bin"
    lost = []

    def once(method: str, path: str, query: str) -> bool:
        if method == "PUT" and path.endswith("/lost.bin") and not lost:
            lost.append(path)
            return True
        return False

    s3.proxy.lose_answer = once
    objects.put_bytes(lake.fs, key, b"mine", create=True)
    assert lost and lake.fs.cat(key) == b"mine" and s3.proxy.statuses[412] >= 1


def test_a_multipart_upload_is_seen_only_once_complete(s3: S3, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(objects, "PART_BYTES", 5 * 2**20)  # S3's smallest part: 3 parts for 12 MiB
    lake, key = Lake(f"s3://{s3.bucket}/raglake"), f"{s3.bucket}/raglake/big.bin"
    data = os.urandom(12 * 2**20)
    seen_during = []

    def look(method: str, path: str, query: str) -> None:
        if method == "PUT" and "partNumber=" in query:
            seen_during.append(s3.keys("raglake/"))

    s3.proxy.hook = look
    objects.put_bytes(lake.fs, key, data, create=True)
    assert len(seen_during) == 3 and all(keys == [] for keys in seen_during)
    assert s3.keys("raglake/") == ["raglake/big.bin"] and lake.fs.cat(key) == data
    assert s3.proxy.requests["CompleteMultipartUpload"] == 1
    with pytest.raises(LakeError, match="already exists"):  # If-None-Match on the completion
        objects.put_bytes(lake.fs, key, os.urandom(12 * 2**20), create=True)
    assert multipart_uploads(s3.moto.url, s3.bucket) == []  # the refused upload was aborted
    assert lake.fs.cat(key) == data


def test_a_write_that_fails_midway_leaves_nothing(s3: S3) -> None:
    lake = Lake(f"s3://{s3.bucket}/raglake")
    spec = TABLES["labels"].schema

    def parts():
        yield spec.empty_table()
        raise OSError(28, "No space left on device")

    with pytest.raises(LakeWriteError, match="cannot write s3://.*No space left"):
        lake.write("labels", "r-1", parts(), "r-1")
    assert s3.keys() == [] and s3.proxy.requests["PutObject"] == 0


def test_throttling_and_500s_are_retried_with_no_lost_or_duplicated_rows(s3: S3, monkeypatch) -> None:
    """Every other PUT and a share of every request answered 503 SlowDown or 500; the S3 client's own retries
    off (AWS_MAX_ATTEMPTS=1) for the lake's writes, so raglake's backoff at the write edge does the work."""
    url = f"s3://{s3.bucket}/raglake"
    monkeypatch.setattr(objects, "BACKOFF", Backoff(retries=8, base_s=0.01, max_s=0.05))
    use_endpoint(monkeypatch, s3.proxy.url, AWS_MAX_ATTEMPTS="1")
    s3.proxy.faults, s3.proxy.max_run = 0.5, 4
    s3.proxy.only = lambda method, path: method == "PUT"
    land(url, GOLDEN, TARGET, "r-one")
    land(url, GOLDEN, TARGET, "r-two", minutes=1)
    assert s3.proxy.injected["503"] > 0 and s3.proxy.injected["500"] > 0
    use_endpoint(monkeypatch, s3.moto.url)  # read straight from the server
    rows = _score_rows(url)
    keys = {(run, case, metric) for run, case, metric, *_ in rows}
    assert len(keys) == len(rows) > 0  # no duplicate
    assert {run for run, *_ in rows} == {"r-one", "r-two"}
    assert len(rows) == 2 * len([r for r in rows if r[0] == "r-one"])  # both runs whole


def test_a_write_gives_up_after_its_retries_with_one_line(s3: S3, monkeypatch) -> None:
    monkeypatch.setattr(objects, "BACKOFF", Backoff(retries=2, base_s=0.01, max_s=0.02))
    use_endpoint(monkeypatch, s3.proxy.url, AWS_MAX_ATTEMPTS="1")
    s3.proxy.faults, s3.proxy.max_run, s3.proxy.only = 1.0, None, (lambda method, path: method == "PUT")
    with pytest.raises(LakeWriteError, match=r"cannot write s3://.*/a\.bin after 3 attempts"):
        objects.put_bytes(Lake(f"s3://{s3.bucket}/raglake").fs, f"{s3.bucket}/raglake/a.bin", b"x", create=True)


def test_the_results_location_writes_each_staged_file_once(s3: S3) -> None:
    store = Store(f"s3://{s3.bucket}/results")
    digest = store.put("batches/ab/one.jsonl", b'{"id": "q1"}\n')
    store.put("batches/ab/one.jsonl", b'{"id": "q1"}\n')  # staged anew: replaces (content-addressed)
    assert store.verified("batches/ab/one.jsonl", digest, "written again") == b'{"id": "q1"}\n'
    assert s3.keys() == ["results/batches/ab/one.jsonl"]
    assert s3.proxy.requests["PutObject"] == 2 and s3.proxy.requests["CopyObject"] == 0


def test_queries_on_a_bucket_lake_cannot_read_outside_it(s3: S3, tmp_path: Path) -> None:
    url = f"s3://{s3.bucket}/raglake"
    land(url, GOLDEN, TARGET, "r-one")
    outside = tmp_path / "outside.parquet"
    duckdb.sql(f"COPY (SELECT 42 AS answer) TO '{outside}'")
    other = f"o-{uuid.uuid4().hex[:12]}"
    make_bucket(s3.moto.url, other)
    fs = Lake(url).fs
    for key in (f"{other}/secret.parquet", f"{s3.bucket}/outside.parquet", f"{s3.bucket}/raglake-other/x.parquet"):
        fs.put_file(str(outside), key)
    con = connect_lake(Lake(url))
    assert run_sql(con, "SELECT count(*) AS n FROM runs").column("n").to_pylist() == [1]
    for query in (
        f"SELECT * FROM read_parquet('s3://{other}/secret.parquet')",
        f"SELECT * FROM 's3://{s3.bucket}/outside.parquet'",
        f"SELECT * FROM read_parquet('s3://{s3.bucket}/raglake-other/x.parquet')",
        f"SELECT * FROM read_text('s3://{other}/secret.parquet')",
        f"SELECT * FROM glob('s3://{s3.bucket}/*')",
        f"SELECT * FROM read_parquet('s3://{s3.bucket}/raglake/*/*/*.parquet')",
    ):
        with pytest.raises(ConfigError, match="SQL error: Permission Error"):
            run_sql(con, query)
    with pytest.raises(ConfigError, match="read-only to queries"):
        run_sql(con, f"COPY (SELECT 1 AS x) TO 's3://{s3.bucket}/raglake/scores/run_id=r-one/x.parquet'")
    assert len(s3.keys("raglake/")) == 8


def test_a_damaged_object_in_a_bucket_lake_is_left_out_with_a_warning(s3: S3, capsys) -> None:
    """raglake.lake.checks on s3://: a foreign file in a run's partition is listed, never read as the table's."""
    url = f"s3://{s3.bucket}/raglake"
    land(url, GOLDEN, TARGET, "r-one")
    lake = Lake(url)
    objects.put_bytes(lake.fs, f"{s3.bucket}/raglake/scores/run_id=r-one/notes.parquet", b"not parquet")
    listed, files = lake.listed("scores"), lake.files("scores")
    assert len(listed) == 2 and len(files) == 1 and all(f.startswith("s3://") for f in listed)
    assert "notes.parquet: not a Parquet file or cut short" in capsys.readouterr().err
    assert run_sql(connect_lake(lake), "SELECT count(DISTINCT run_id) AS n FROM scores").column("n").to_pylist() == [1]
