"""Read a document collection, or a single file, from a local folder or S3.

``read_documents`` walks a folder, or every object under an S3 prefix, extracts the text of each
file with the extractor registered for its suffix in ``EXTRACTORS``, and returns the documents
together with the files it skipped and why: nothing is dropped silently.

S3 is configured by the environment variables of an OpenShift AI connection:
``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``, ``AWS_S3_ENDPOINT`` (optional: MinIO, ODF,
Ceph...), ``AWS_DEFAULT_REGION`` (default ``us-east-1``) and ``AWS_S3_BUCKET``, the bucket used
when a URI leaves it empty: ``s3:///docs`` is ``docs/`` in that bucket, ``s3://`` all of it.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

import pyarrow as pa

from ragsweep.core.errors import RagsweepError
from ragsweep.core.schemas import DOCUMENTS
from ragsweep.documents.extraction import EXTRACTORS, UnreadableFile

if TYPE_CHECKING:  # boto3 is imported where used: most steps read no S3 location
    from botocore.client import BaseClient

log = logging.getLogger("ragsweep")

UNSUPPORTED, UNREADABLE, NO_TEXT = "unsupported type", "unreadable", "no text"
# A document's text is read up to this many characters (about 5,000 pages of prose), with a
# warning naming it: what a corpus holds beyond it (a log or a dump) would only hold the
# steps' memory, not answers.
MAX_DOCUMENT_CHARS = 10_000_000
# Documents are read and made an Arrow table this many at a time, their strings then let go:
# a corpus is held once, as Arrow, not also as Python strings.
TABLE_ROWS = 1000


# ---- S3 --------------------------------------------------------------------------------------


def s3_client() -> BaseClient:
    """A boto3 S3 client configured from the connection's environment variables.

    Timeouts and retries are short, so that an unreachable endpoint fails in seconds.
    """
    import boto3
    from botocore.config import Config

    key_id = os.environ.get("AWS_ACCESS_KEY_ID") or None
    secret = os.environ.get("AWS_SECRET_ACCESS_KEY") or None
    if bool(key_id) != bool(secret):
        raise RagsweepError(
            "incomplete S3 credentials: set both AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"
        )
    endpoint = os.environ.get("AWS_S3_ENDPOINT") or None
    config = Config(
        connect_timeout=5,
        read_timeout=30,
        retries={"max_attempts": 2, "mode": "standard"},
        # S3-compatible servers (MinIO, Ceph) rarely resolve bucket subdomains.
        s3={"addressing_style": "path"} if endpoint else None,
    )
    try:  # a new session: boto3's default one keeps the credentials it found first
        return boto3.session.Session().client(
            "s3",
            endpoint_url=endpoint,
            region_name=os.environ.get("AWS_DEFAULT_REGION") or "us-east-1",
            aws_access_key_id=key_id,
            aws_secret_access_key=secret,
            aws_session_token=os.environ.get("AWS_SESSION_TOKEN") or None,
            config=config,
        )
    except ValueError as exc:  # botocore's "Invalid endpoint: ..."
        raise RagsweepError(f"AWS_S3_ENDPOINT: {exc} (expected e.g. https://host:9000)") from None


def split_s3(uri: str) -> tuple[str, str]:
    """Bucket and key of ``s3://bucket/key``; an empty bucket is AWS_S3_BUCKET."""
    bucket, _, key = uri.removeprefix("s3://").partition("/")
    bucket = bucket or os.environ.get("AWS_S3_BUCKET", "")
    if not bucket:
        raise RagsweepError(f"{uri}: no bucket: write s3://BUCKET/prefix or set AWS_S3_BUCKET")
    return bucket, key


@contextmanager
def s3_errors(uri: str, bucket: str) -> Iterator[None]:
    """Turn botocore's failures into one-line messages that say what to check."""
    from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError
    from botocore.exceptions import ConnectionError as S3ConnectionError

    try:
        yield
    except ClientError as exc:
        error = exc.response.get("Error", {})
        code = error.get("Code", "")
        status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        if code == "NoSuchBucket":
            raise RagsweepError(f"{uri}: bucket '{bucket}' does not exist") from None
        if code in ("NoSuchKey", "404"):
            raise RagsweepError(f"{uri}: no such object") from None
        if status == 403:
            raise RagsweepError(
                f"{uri}: access denied ({code}): check AWS_ACCESS_KEY_ID and "
                f"AWS_SECRET_ACCESS_KEY, and that this key may read bucket '{bucket}'"
            ) from None
        raise RagsweepError(f"{uri}: S3 error {code}: {error.get('Message', '')}") from None
    except NoCredentialsError:
        raise RagsweepError(
            f"{uri}: no S3 credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"
        ) from None
    except S3ConnectionError as exc:
        endpoint = os.environ.get("AWS_S3_ENDPOINT") or "the AWS default"
        raise RagsweepError(
            f"{uri}: cannot reach the S3 endpoint {endpoint}: check AWS_S3_ENDPOINT ({exc})"
        ) from None
    except BotoCoreError as exc:
        raise RagsweepError(f"{uri}: S3 request failed: {exc}") from None


def _get_object(client: BaseClient, bucket: str, key: str) -> bytes:
    uri = f"s3://{bucket}/{key}"
    with s3_errors(uri, bucket):
        return client.get_object(Bucket=bucket, Key=key)["Body"].read()


def _s3_objects(uri: str, client: BaseClient) -> dict[str, dict]:
    """The objects under ``s3://bucket/prefix`` by doc_id (their key under the prefix), as
    listed: ``Key``, ``ETag``, ``Size``."""
    bucket, prefix = split_s3(uri)
    prefix = prefix.strip("/") + "/" if prefix.strip("/") else ""
    items: list[dict] = []
    with s3_errors(uri, bucket):
        for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
            items.extend(page.get("Contents", []))
    return {i["Key"][len(prefix) :]: i for i in items if not i["Key"].endswith("/")}


def _s3_files(uri: str) -> tuple[list[tuple[str, str]], Callable[[str], bytes]]:
    bucket = split_s3(uri)[0]
    client = s3_client()
    objects = _s3_objects(uri, client)
    files = [(doc_id, f"s3://{bucket}/{item['Key']}") for doc_id, item in objects.items()]

    def fetch(source: str) -> bytes:
        return _get_object(client, *split_s3(source))

    return sorted(files), fetch


# ---- local files -----------------------------------------------------------------------------


def _local_files(uri: str) -> tuple[list[tuple[str, str]], Callable[[str], bytes]]:
    root = Path(uri).expanduser()
    if not root.exists():
        raise RagsweepError(f"{uri}: folder does not exist")
    if not root.is_dir():
        raise RagsweepError(f"{uri}: not a folder: give the folder that holds the documents")
    paths = [Path(folder, name) for folder, _, names in os.walk(root) for name in names]
    return sorted((path.relative_to(root).as_posix(), str(path)) for path in paths), _read_local


def _read_local(source: str) -> bytes:
    try:
        return Path(source).read_bytes()
    except OSError as exc:
        raise UnreadableFile(f"cannot read ({exc.strerror})") from None


def read_bytes(uri: str) -> bytes:
    """The bytes of one local file or S3 object (``s3://bucket/key``)."""
    if uri.startswith("s3://"):
        bucket, key = split_s3(uri)
        if not key or key.endswith("/"):
            raise RagsweepError(f"{uri}: names no object: expected s3://bucket/key")
        return _get_object(s3_client(), bucket, key)
    path = Path(uri).expanduser()
    if not path.is_file():
        raise RagsweepError(
            f"{uri}: " + ("a folder, not a file" if path.is_dir() else "no such file")
        )
    try:
        return path.read_bytes()
    except OSError as exc:
        raise RagsweepError(f"{uri}: cannot read ({exc.strerror})") from None


def location(bucket: str, key: str) -> str:
    """The URI of a (bucket, key) pair, as Red Hat AutoRAG's pipeline parameters name data.

    With a bucket, ``s3://bucket/key``; without one, ``key`` is itself the location: a local
    path (``ragsweep run``, or a folder inside the image) or an ``s3://`` URI.
    """
    if not key:
        raise RagsweepError("no key: give the document folder / prefix or the test data file")
    return f"s3://{bucket}/{key.lstrip('/')}" if bucket else key


def locations(bucket: str, key: str, keys: Sequence[str] = ()) -> list[str]:
    """The locations of the documents: ``key``'s, then each of ``keys``' (Red Hat AutoRAG
    upstream's ``input_data_keys``), in the bucket when one is given; repeats once."""
    given = list(dict.fromkeys(k for k in (key, *keys) if k))
    if not given:
        raise RagsweepError("no documents: give input_data_key or input_data_keys")
    return [location(bucket, k) for k in given]


def split_location(uri: str) -> tuple[str, str]:
    """The (bucket, key) pair of a location; the inverse of ``location``."""
    if uri.startswith("s3://") and not uri.startswith("s3:///"):
        bucket, _, key = uri.removeprefix("s3://").partition("/")
        return bucket, key
    return "", uri


# ---- the collection --------------------------------------------------------------------------


@dataclass(frozen=True)
class DocumentSet:
    """The documents read (a DOCUMENTS table) and the skipped files' doc_ids by reason."""

    table: pa.Table
    skipped: dict[str, list[str]]

    def summary(self) -> str:
        """E.g. ``read 12 documents, skipped 3 (2 unsupported type, 1 unreadable)``."""
        total = sum(len(ids) for ids in self.skipped.values())
        detail = f" ({self.skip_counts()})" if total else ""
        return f"read {self.table.num_rows} documents, skipped {total}{detail}"

    def skip_counts(self) -> str:
        """E.g. ``2 unsupported type, 1 unreadable``."""
        return ", ".join(f"{len(ids)} {reason}" for reason, ids in self.skipped.items() if ids)


def read_documents(uri: str) -> DocumentSet:
    """Read every supported document under a local folder or ``s3://bucket/prefix``.

    ``s3:///prefix`` (no bucket) reads from the bucket named by ``AWS_S3_BUCKET``.

    A document's ``doc_id`` is its key relative to the folder or prefix, '/'-separated. Files of
    other types, unreadable files and files without text are skipped, listed in ``skipped``
    and logged.
    """
    files, fetch = _s3_files(uri) if uri.startswith("s3://") else _local_files(uri)
    skipped: dict[str, list[str]] = {UNSUPPORTED: [], UNREADABLE: [], NO_TEXT: []}
    supported = []
    for doc_id, source in files:
        if _suffix(doc_id) in EXTRACTORS:
            supported.append((doc_id, source))
        else:
            skipped[UNSUPPORTED].append(doc_id)
            log.debug("skipped %s: unsupported file type", source)

    def text_of(source: str) -> str | UnreadableFile:
        try:
            return EXTRACTORS[_suffix(source)](fetch(source))
        except UnreadableFile as exc:
            return exc

    tables = []  # the texts as strings a table's worth at a time, read TABLE_ROWS at once
    with ThreadPoolExecutor(max_workers=8) as pool:
        for first in range(0, len(supported), TABLE_ROWS):
            part, rows = supported[first : first + TABLE_ROWS], []
            texts = pool.map(text_of, [source for _, source in part])
            for (doc_id, source), text in zip(part, texts, strict=True):
                if isinstance(text, UnreadableFile):
                    skipped[UNREADABLE].append(doc_id)
                    log.warning("skipped %s: %s", source, text)
                elif not text.strip():
                    skipped[NO_TEXT].append(doc_id)
                    log.warning("skipped %s: no text could be extracted", source)
                else:
                    text = _within_limit(source, text)
                    format_ = _suffix(doc_id)[1:]
                    rows.append(
                        {"doc_id": doc_id, "source": source, "format": format_, "text": text}
                    )
            tables.append(pa.Table.from_pylist(rows, schema=DOCUMENTS))
    documents = DocumentSet(pa.concat_tables(tables or [DOCUMENTS.empty_table()]), skipped)
    read = documents.table.num_rows
    if not read:
        raise _no_documents(uri, len(files), documents.skip_counts())
    log.log(logging.WARNING if read < len(files) else logging.INFO, documents.summary())
    return documents


def _within_limit(source: str, text: str) -> str:
    """``text`` up to ``MAX_DOCUMENT_CHARS``, cut at white space, with a warning naming the
    document when it is longer."""
    if len(text) <= MAX_DOCUMENT_CHARS:
        return text
    cut = text.rfind(" ", 0, MAX_DOCUMENT_CHARS + 1)
    kept = text[: cut if cut > MAX_DOCUMENT_CHARS // 2 else MAX_DOCUMENT_CHARS]
    log.warning(
        "%s: %s characters of text; read up to the limit of %s characters (%s), the rest "
        "is not swept",
        source,
        f"{len(text):,}",
        f"{MAX_DOCUMENT_CHARS:,}",
        f"{len(kept):,} kept",
    )
    return kept


def read_locations(uris: Sequence[str]) -> DocumentSet:
    """The documents of several locations, each read by ``read_documents``: a doc_id is its
    path under its own location, so one found under two is refused (the test set's
    references could not tell them apart)."""
    sets = [read_documents(uri) for uri in uris]
    where: dict[str, str] = {}
    for uri, documents in zip(uris, sets, strict=True):
        for doc_id in documents.table["doc_id"].to_pylist():
            if doc_id in where:
                raise RagsweepError(
                    f"document {doc_id!r} is both in {where[doc_id]} and in {uri}: a "
                    "document's id is its path under its location, so the two cannot be told "
                    "apart; give locations whose files have different paths"
                )
            where[doc_id] = uri
    if len(sets) == 1:
        return sets[0]
    skipped = {reason: [i for d in sets for i in d.skipped[reason]] for reason in sets[0].skipped}
    merged = DocumentSet(pa.concat_tables([d.table for d in sets]), skipped)
    log.info("%s in %d locations", merged.summary(), len(sets))
    return merged


def document_keys(uri: str) -> list[str]:
    """The doc_ids of the supported files under a folder or ``s3://bucket/prefix``, listed
    without reading them; an error when the location is missing or holds none."""
    files, _ = _s3_files(uri) if uri.startswith("s3://") else _local_files(uri)
    keys = [doc_id for doc_id, _ in files if _suffix(doc_id) in EXTRACTORS]
    if not keys:
        raise _no_documents(uri, len(files), f"{len(files)} unsupported type")
    return keys


def document_versions(uri: str) -> dict[str, str]:
    """Each supported document's id and a version of its content, reading no S3 object: an
    object's ETag and size, a local file's SHA-256 (remembered by path, size, mtime and
    inode, ``ragsweep.models.identity``: a folder is read whole once, not at every run)."""
    from ragsweep.models.identity import file_digests

    if uri.startswith("s3://"):
        objects = _s3_objects(uri, s3_client())
        return {
            doc_id: f"{item['ETag']}:{item['Size']}"
            for doc_id, item in sorted(objects.items())
            if _suffix(doc_id) in EXTRACTORS
        }
    files = [
        (doc_id, Path(p)) for doc_id, p in _local_files(uri)[0] if _suffix(doc_id) in EXTRACTORS
    ]
    digests = file_digests([path for _, path in files])
    return {doc_id: digests[path] for doc_id, path in files}


def file_version(uri: str) -> str:
    """A version of one local file's content (its SHA-256, remembered as
    ``document_versions``'s) or S3 object's (its ETag and size), reading no S3 object."""
    from ragsweep.models.identity import file_digest

    if uri.startswith("s3://"):
        bucket, key = split_s3(uri)
        with s3_errors(uri, bucket):
            head = s3_client().head_object(Bucket=bucket, Key=key)
        return f"{head['ETag']}:{head['ContentLength']}"
    path = Path(uri).expanduser()
    if not path.is_file():
        raise RagsweepError(f"{uri}: no such file")
    return file_digest(path)


def _no_documents(uri: str, files: int, skipped: str) -> RagsweepError:
    if not files:
        return RagsweepError(f"{uri}: no documents found: it holds no files")
    types = " ".join(sorted(EXTRACTORS))
    return RagsweepError(
        f"{uri}: no documents found among {files} files ({skipped}); supported types: {types}"
    )


def _suffix(name: str) -> str:
    return PurePosixPath(name).suffix.lower()
