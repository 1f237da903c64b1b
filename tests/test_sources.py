"""Reading documents from local folders and from S3 (a real moto server on 127.0.0.1)."""

from __future__ import annotations

import io
import logging
import re
import socket
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import boto3
import docx
import pytest

from ragsweep.core.errors import RagsweepError
from ragsweep.documents import sources
from ragsweep.documents.sources import read_bytes, read_documents

HTML = b"""<!doctype html>
<html><head><title> Install
  Guide </title><meta charset="utf-8"><style>p { color: red }</style>
<script>var hidden = "script text";</script></head>
<body><h1>Installing   ragsweep</h1>
<p>Run the   installer
and wait.</p><p>Then&nbsp;check<br>the version.</p>
<ul><li>Linux</li><li>macOS</li></ul>
<table><tr><td>a</td><td>b</td></tr><tr><td>c</td><td>d</td></tr></table>
<pre>
pip install ragsweep
  --upgrade
</pre><div>Done.</div></body></html>"""

HTML_TEXT = (
    "Install Guide\n\n# Installing ragsweep\n\nRun the installer and wait.\n\nThen check\n"
    "the version.\n\nLinux\nmacOS\n\na b\nc d\n\npip install ragsweep\n  --upgrade\n\nDone."
)


def make_pdf(pages: list[str]) -> bytes:
    """A minimal PDF with one line of Helvetica text on each page."""
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [%s] /Count %d >>"
        % (b" ".join(b"%d 0 R" % (4 + 2 * i) for i in range(len(pages))), len(pages)),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    for i, text in enumerate(pages):
        stream = b"BT /F1 12 Tf 72 720 Td (%s) Tj ET" % text.encode()
        objects.append(
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] "
            b"/Resources << /Font << /F1 3 0 R >> >> /Contents %d 0 R >>" % (5 + 2 * i)
        )
        objects.append(b"<< /Length %d >>\nstream\n%s\nendstream" % (len(stream), stream))
    pdf = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, 1):
        offsets.append(len(pdf))
        pdf += b"%d 0 obj\n%s\nendobj\n" % (number, body)
    xref = len(pdf)
    pdf += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    pdf += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    pdf += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (
        len(objects) + 1,
        xref,
    )
    return bytes(pdf)


def make_docx(paragraphs: list[str]) -> bytes:
    document = docx.Document()
    for text in paragraphs:
        document.add_paragraph(text)
    stream = io.BytesIO()
    document.save(stream)
    return stream.getvalue()


def write(root: Path, files: dict[str, bytes | str]) -> Path:
    for name, content in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content.encode() if isinstance(content, str) else content)
    return root


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# ---- local folders ---------------------------------------------------------------------------


def test_reads_every_supported_format_from_nested_folders(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "intro.txt": "Plain text.\r\nSecond line.",
            "guide/usage.md": "# Usage\n\nCall `sweep()`.",
            "guide/deep/api.RST": "API\n===\n\nThe reference.",
            "web/page.html": HTML,
            "reports/annual.pdf": make_pdf(["Revenue grew", "Costs fell"]),
            "letters/offer.docx": make_docx(["Dear reader,", "Welcome aboard."]),
        },
    )

    documents = read_documents(str(tmp_path))

    rows = {row["doc_id"]: row for row in documents.table.to_pylist()}
    assert documents.table.column("doc_id").to_pylist() == sorted(rows)
    assert rows["intro.txt"]["text"] == "Plain text.\nSecond line."
    assert rows["guide/usage.md"]["text"] == "# Usage\n\nCall `sweep()`."
    assert rows["guide/deep/api.RST"]["format"] == "rst"
    assert rows["web/page.html"]["text"] == HTML_TEXT
    assert rows["reports/annual.pdf"]["text"] == "Revenue grew\nCosts fell"
    assert rows["letters/offer.docx"]["text"] == "Dear reader,\nWelcome aboard."
    assert rows["guide/usage.md"]["source"] == str(tmp_path / "guide" / "usage.md")
    assert {row["format"] for row in rows.values()} == {"txt", "md", "rst", "html", "pdf", "docx"}
    assert documents.skipped == {"unsupported type": [], "unreadable": [], "no text": []}


def test_html_drops_script_style_and_head_but_keeps_the_title_first(tmp_path: Path) -> None:
    write(tmp_path, {"page.htm": HTML})

    text = read_documents(str(tmp_path)).table.column("text")[0].as_py()

    assert text.splitlines()[0] == "Install Guide"
    assert "script text" not in text and "color" not in text
    assert text == HTML_TEXT


def test_unsupported_binary_corrupt_and_empty_files_are_skipped_counted_and_warned(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    write(
        tmp_path,
        {
            "good.md": "Some text.",
            "conf.py": "project = 'x'",
            "Makefile": "all:",
            "img/logo.png": b"\x89PNG\r\n\x1a\n\x00\x00",
            "blob.txt": b"text\x00with NUL",
            "latin1.txt": "caf\u00e9".encode("latin-1"),
            "broken.pdf": b"%PDF-1.4 this is not a pdf",
            "broken.docx": b"PK not a zip",
            "blank.rst": "  \n\n ",
            "scripts-only.html": "<html><script>x()</script></html>",
        },
    )

    with caplog.at_level(logging.DEBUG, logger="ragsweep"):
        documents = read_documents(str(tmp_path))

    assert documents.table.column("doc_id").to_pylist() == ["good.md"]
    assert documents.skipped == {
        "unsupported type": ["Makefile", "conf.py", "img/logo.png"],
        "unreadable": ["blob.txt", "broken.docx", "broken.pdf", "latin1.txt"],
        "no text": ["blank.rst", "scripts-only.html"],
    }
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    for name, why in [
        ("blob.txt", "NUL"),
        ("latin1.txt", "not UTF-8"),
        ("broken.pdf", "not a readable PDF"),
        ("broken.docx", "not a readable .docx"),
        ("blank.rst", "no text"),
    ]:
        assert any(str(tmp_path / name) in w and why in w for w in warnings), (name, warnings)
    assert documents.summary() in warnings
    assert documents.summary() == (
        "read 1 documents, skipped 9 (3 unsupported type, 4 unreadable, 2 no text)"
    )


def test_a_document_beyond_the_limit_is_read_up_to_it_with_a_warning_naming_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sources, "MAX_DOCUMENT_CHARS", 1_000)
    (tmp_path / "small.txt").write_text("a short document\n")
    (tmp_path / "huge.txt").write_text("word " * 1_000)  # 5,000 characters
    with caplog.at_level(logging.WARNING, logger="ragsweep"):
        table = sources.read_documents(str(tmp_path)).table
    texts = dict(zip(table["doc_id"].to_pylist(), table["text"].to_pylist(), strict=True))
    assert texts["small.txt"] == "a short document\n"
    assert 500 < len(texts["huge.txt"]) <= 1_000 and texts["huge.txt"].endswith("word")
    [warning] = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert "huge.txt" in warning and "5,000 characters" in warning and "1,000" in warning


def test_empty_folder_is_an_error_naming_it(tmp_path: Path) -> None:
    with pytest.raises(RagsweepError, match=f"^{re.escape(str(tmp_path))}: no documents found"):
        read_documents(str(tmp_path))


def test_folder_without_supported_files_is_an_error_that_says_what_was_skipped(
    tmp_path: Path,
) -> None:
    write(tmp_path, {"conf.py": "x = 1", "logo.png": b"\x89PNG"})

    with pytest.raises(RagsweepError) as error:
        read_documents(str(tmp_path))

    assert str(tmp_path) in str(error.value)
    assert "no documents found among 2 files (2 unsupported type)" in str(error.value)
    assert ".md" in str(error.value)


def test_missing_folder_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(RagsweepError, match="nowhere: folder does not exist"):
        read_documents(str(tmp_path / "nowhere"))


def test_a_file_is_not_a_documents_folder(tmp_path: Path) -> None:
    write(tmp_path, {"one.md": "text"})

    with pytest.raises(RagsweepError, match=r"one\.md: not a folder"):
        read_documents(str(tmp_path / "one.md"))


def test_read_bytes_reads_a_local_file_and_names_a_missing_one(tmp_path: Path) -> None:
    write(tmp_path, {"a.json": b"[1]"})

    assert read_bytes(str(tmp_path / "a.json")) == b"[1]"
    with pytest.raises(RagsweepError, match=r"b\.json: no such file"):
        read_bytes(str(tmp_path / "b.json"))
    with pytest.raises(RagsweepError, match="a folder, not a file"):
        read_bytes(str(tmp_path))


# ---- S3 --------------------------------------------------------------------------------------


def test_reads_documents_under_an_s3_prefix_relative_to_it(s3, bucket: str) -> None:
    s3.put_object(Bucket=bucket, Key="docs/", Body=b"")  # a folder marker
    s3.put_object(Bucket=bucket, Key="docs/a.md", Body=b"Alpha")
    s3.put_object(Bucket=bucket, Key="docs/sub/b.pdf", Body=make_pdf(["Beta"]))
    s3.put_object(Bucket=bucket, Key="docs/sub/c.png", Body=b"\x89PNG")
    s3.put_object(Bucket=bucket, Key="docs2/not-under-prefix.md", Body=b"Nope")

    documents = read_documents(f"s3://{bucket}/docs")

    assert documents.table.to_pylist() == [
        {"doc_id": "a.md", "source": f"s3://{bucket}/docs/a.md", "format": "md", "text": "Alpha"},
        {
            "doc_id": "sub/b.pdf",
            "source": f"s3://{bucket}/docs/sub/b.pdf",
            "format": "pdf",
            "text": "Beta",
        },
    ]
    assert documents.skipped["unsupported type"] == ["sub/c.png"]


def test_s3_listing_follows_pages_past_1000_objects(s3, bucket: str) -> None:
    # Every tenth object is a document; the others are listed and skipped without a download.
    keys = [f"kb/part{i // 100:02d}/{i:04d}.{'txt' if i % 10 == 9 else 'png'}" for i in range(1100)]
    with ThreadPoolExecutor(max_workers=16) as pool:
        list(pool.map(lambda key: s3.put_object(Bucket=bucket, Key=key, Body=key.encode()), keys))

    documents = read_documents(f"s3://{bucket}/kb/")

    expected = sorted(key.removeprefix("kb/") for key in keys if key.endswith(".txt"))
    assert documents.table.column("doc_id").to_pylist() == expected
    assert len(documents.skipped["unsupported type"]) == 990
    assert documents.table.column("text")[-1].as_py() == "kb/part10/1099.txt"


def test_empty_bucket_in_the_uri_means_aws_s3_bucket(s3, bucket: str, monkeypatch) -> None:
    s3.put_object(Bucket=bucket, Key="docs/a.txt", Body=b"Alpha")
    monkeypatch.setenv("AWS_S3_BUCKET", bucket)

    assert read_documents("s3:///docs").table.column("source").to_pylist() == [
        f"s3://{bucket}/docs/a.txt"
    ]
    assert read_documents("s3://").table.column("doc_id").to_pylist() == ["docs/a.txt"]


def test_empty_bucket_without_aws_s3_bucket_is_an_error(s3) -> None:
    with pytest.raises(RagsweepError, match=r"s3:///docs: no bucket: .* set AWS_S3_BUCKET"):
        read_documents("s3:///docs")


def test_empty_s3_prefix_is_an_error_naming_the_uri(s3, bucket: str) -> None:
    with pytest.raises(RagsweepError, match=f"^s3://{bucket}/none: no documents found"):
        read_documents(f"s3://{bucket}/none")


def test_missing_bucket_is_an_error(s3) -> None:
    with pytest.raises(
        RagsweepError, match=r"^s3://no-such-bucket: bucket 'no-such-bucket' does not"
    ):
        read_documents("s3://no-such-bucket")


def test_read_bytes_reads_an_s3_object_and_names_a_missing_key(s3, bucket: str) -> None:
    s3.put_object(Bucket=bucket, Key="data/test.json", Body=b"[]")

    assert read_bytes(f"s3://{bucket}/data/test.json") == b"[]"
    with pytest.raises(RagsweepError, match=f"^s3://{bucket}/data/gone.json: no such object$"):
        read_bytes(f"s3://{bucket}/data/gone.json")
    with pytest.raises(RagsweepError, match="names no object"):
        read_bytes(f"s3://{bucket}/data/")


def test_unknown_access_key_is_refused_naming_the_variables_not_the_secret(
    s3, bucket: str, moto_auth
) -> None:
    moto_auth()

    with pytest.raises(RagsweepError) as error:
        read_documents(f"s3://{bucket}/docs")

    message = str(error.value)
    assert message.startswith(f"s3://{bucket}/docs: access denied (InvalidAccessKeyId)")
    assert "AWS_ACCESS_KEY_ID" in message and "AWS_SECRET_ACCESS_KEY" in message
    assert "testing-secret" not in message


def test_key_without_permission_is_access_denied(
    s3, bucket: str, moto_auth, moto_endpoint: str, monkeypatch
) -> None:
    iam = boto3.client("iam", endpoint_url=moto_endpoint, region_name="us-east-1")
    iam.create_user(UserName="reader")
    key = iam.create_access_key(UserName="reader")["AccessKey"]
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", key["AccessKeyId"])
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", key["SecretAccessKey"])
    moto_auth()

    with pytest.raises(RagsweepError, match=r"access denied \(AccessDenied\)") as error:
        read_bytes(f"s3://{bucket}/a.json")

    assert key["SecretAccessKey"] not in str(error.value)


def test_unreachable_endpoint_fails_within_seconds(s3, monkeypatch) -> None:
    endpoint = f"http://127.0.0.1:{closed_port()}"
    monkeypatch.setenv("AWS_S3_ENDPOINT", endpoint)
    started = time.monotonic()

    with pytest.raises(RagsweepError, match=f"cannot reach the S3 endpoint {endpoint}"):
        read_documents("s3://bucket/docs")

    assert time.monotonic() - started < 10


def test_missing_credentials_say_which_variables_to_set(
    s3, bucket: str, monkeypatch, tmp_path: Path
) -> None:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")

    with pytest.raises(RagsweepError, match="no S3 credentials: set AWS_ACCESS_KEY_ID and"):
        read_documents(f"s3://{bucket}/docs")


def test_half_set_credentials_are_an_error(s3, monkeypatch) -> None:
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")

    with pytest.raises(RagsweepError, match="set both AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"):
        read_bytes("s3://bucket/key")


def test_autorag_bucket_and_key_name_a_location_and_back() -> None:
    from ragsweep.documents.sources import location, split_location

    assert location("docs", "kb/") == "s3://docs/kb/"
    assert location("", "/data/kb") == "/data/kb"  # no bucket: the key is the location
    assert location("", "s3:///kb") == "s3:///kb"
    for uri in ("s3://docs/kb/", "/data/kb", "s3:///kb", "relative/testset.json"):
        assert location(*split_location(uri)) == uri
    with pytest.raises(RagsweepError, match="no key"):
        location("docs", "")
