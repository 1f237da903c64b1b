#!/usr/bin/env python3
"""Render the example knowledge base's PDF document from a plain-text source.

Usage:
    python examples/make_pdf.py

Reads ``examples/pdf_source/warranty-and-returns.txt`` and writes
``examples/docs/policies/warranty-and-returns.pdf``.

The script uses only the Python standard library and writes a minimal but
valid PDF 1.4 file: US Letter pages, the base-14 fonts Helvetica and
Helvetica-Bold with WinAnsiEncoding, and a correct cross-reference table.
The output is byte-for-byte deterministic (no timestamps, no random IDs).

Source format:
    * a line starting with "# " is a heading (bold, larger);
    * an empty line is vertical space between paragraphs;
    * every other line is printed as one line of text. Lines that are too
      wide for the page are wrapped at spaces, so the source is best kept
      hard-wrapped at about 85 characters.
"""

from __future__ import annotations

from pathlib import Path

HERE = Path(__file__).resolve().parent
SOURCE = HERE / "pdf_source" / "warranty-and-returns.txt"
OUTPUT = HERE / "docs" / "policies" / "warranty-and-returns.pdf"
TITLE = "Brackwater Labs: Warranty, Returns and Refunds Policy"

PAGE_WIDTH = 612  # US Letter, in points
PAGE_HEIGHT = 792
MARGIN = 72
BODY_FONT, BODY_SIZE, BODY_LEADING = "F1", 10.5, 14
HEAD_FONT, HEAD_SIZE, HEAD_LEADING = "F2", 13, 20
PARAGRAPH_GAP = 7

# Glyph widths (1/1000 em) of Helvetica for ASCII 32..126, from the
# standard Adobe font metrics. Helvetica-Bold is measured with the same
# table scaled by 1.06, which is a safe over-estimate for wrapping.
# fmt: off
_HELVETICA_WIDTHS = [
    278, 278, 355, 556, 556, 889, 667, 191, 333, 333, 389, 584, 278, 333,
    278, 278, 556, 556, 556, 556, 556, 556, 556, 556, 556, 556, 278, 278,
    584, 584, 584, 556, 1015, 667, 667, 722, 722, 667, 611, 778, 722, 278,
    500, 667, 556, 833, 722, 778, 667, 778, 722, 667, 611, 722, 667, 944,
    667, 667, 611, 278, 278, 278, 469, 556, 333, 556, 556, 500, 556, 556,
    278, 556, 556, 222, 222, 500, 222, 833, 556, 556, 556, 556, 333, 500,
    278, 556, 500, 722, 500, 500, 500, 334, 260, 334, 584,
]
# fmt: on


def text_width(text: str, size: float, bold: bool = False) -> float:
    """Approximate rendered width of ``text`` in points."""
    units = 0
    for ch in text:
        code = ord(ch)
        units += _HELVETICA_WIDTHS[code - 32] if 32 <= code <= 126 else 556
    return units * size / 1000 * (1.06 if bold else 1.0)


def wrap(line: str, size: float, max_width: float, bold: bool = False) -> list[str]:
    """Split ``line`` at spaces so that each piece fits into ``max_width``."""
    if text_width(line, size, bold) <= max_width:
        return [line]
    indent = line[: len(line) - len(line.lstrip(" "))]
    pieces: list[str] = []
    current = ""
    for word in line.split():
        candidate = f"{current} {word}" if current else indent + word
        if current and text_width(candidate, size, bold) > max_width:
            pieces.append(current)
            current = indent + word
        else:
            current = candidate
    if current:
        pieces.append(current)
    return pieces


def pdf_string(text: str) -> bytes:
    """Encode ``text`` as a PDF literal string in WinAnsi (cp1252)."""
    raw = text.encode("cp1252", errors="replace")
    raw = raw.replace(b"\\", b"\\\\").replace(b"(", b"\\(").replace(b")", b"\\)")
    return b"(" + raw + b")"


def layout(source_text: str) -> list[list[tuple[str, float, float, str]]]:
    """Turn the source into pages of (font, size, y, text) lines."""
    usable = PAGE_WIDTH - 2 * MARGIN
    pages: list[list[tuple[str, float, float, str]]] = [[]]
    y = PAGE_HEIGHT - MARGIN

    def place(font: str, size: float, leading: float, text: str) -> None:
        nonlocal y
        if y - leading < MARGIN:
            pages.append([])
            y = PAGE_HEIGHT - MARGIN
        y -= leading
        pages[-1].append((font, size, y, text))

    for raw_line in source_text.splitlines():
        line = raw_line.rstrip()
        if not line:
            if pages[-1]:
                y -= PARAGRAPH_GAP
            continue
        if line.startswith("# "):
            heading = line[2:].strip()
            if pages[-1]:
                y -= PARAGRAPH_GAP
            for piece in wrap(heading, HEAD_SIZE, usable, bold=True):
                place(HEAD_FONT, HEAD_SIZE, HEAD_LEADING, piece)
            continue
        for piece in wrap(line, BODY_SIZE, usable):
            place(BODY_FONT, BODY_SIZE, BODY_LEADING, piece)
    return [page for page in pages if page]


def content_stream(lines: list[tuple[str, float, float, str]], page_no: int, total: int) -> bytes:
    """Build the drawing operators for one page."""
    ops: list[bytes] = []
    for font, size, y, text in lines:
        ops.append(
            b"BT /%s %g Tf %d %.2f Td %s Tj ET" % (font.encode(), size, MARGIN, y, pdf_string(text))
        )
    footer = f"Page {page_no} of {total}"
    x = PAGE_WIDTH - MARGIN - text_width(footer, 8)
    ops.append(b"BT /F1 8 Tf %.2f %d Td %s Tj ET" % (x, MARGIN // 2, pdf_string(footer)))
    return b"\n".join(ops) + b"\n"


def build_pdf(source_text: str, title: str) -> bytes:
    """Return the complete PDF file as bytes."""
    pages = layout(source_text)
    objects: list[bytes] = []  # objects[i] is object number i + 1

    def add(body: bytes) -> int:
        objects.append(body)
        return len(objects)

    catalog_id = add(b"")  # filled in once the page tree exists
    pages_id = add(b"")
    font_regular = add(
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>"
    )
    font_bold = add(
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica-Bold /Encoding /WinAnsiEncoding >>"
    )
    info_id = add(b"<< /Title %s /Producer (ragsweep examples/make_pdf.py) >>" % pdf_string(title))

    page_ids = []
    for number, lines in enumerate(pages, start=1):
        stream = content_stream(lines, number, len(pages))
        content_id = add(b"<< /Length %d >>\nstream\n%s\nendstream" % (len(stream), stream))
        page_ids.append(
            add(
                b"<< /Type /Page /Parent %d 0 R /MediaBox [0 0 %d %d] "
                b"/Resources << /Font << /F1 %d 0 R /F2 %d 0 R >> >> /Contents %d 0 R >>"
                % (pages_id, PAGE_WIDTH, PAGE_HEIGHT, font_regular, font_bold, content_id)
            )
        )

    kids = b" ".join(b"%d 0 R" % pid for pid in page_ids)
    objects[pages_id - 1] = b"<< /Type /Pages /Kids [%s] /Count %d >>" % (kids, len(page_ids))
    objects[catalog_id - 1] = b"<< /Type /Catalog /Pages %d 0 R >>" % pages_id

    out = bytearray(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n%s\nendobj\n" % (number, body)

    xref_offset = len(out)
    out += b"xref\n0 %d\n" % (len(objects) + 1)
    out += b"0000000000 65535 f \n"
    for offset in offsets:
        out += b"%010d 00000 n \n" % offset
    out += b"trailer\n<< /Size %d /Root %d 0 R /Info %d 0 R >>\n" % (
        len(objects) + 1,
        catalog_id,
        info_id,
    )
    out += b"startxref\n%d\n%%%%EOF\n" % xref_offset
    return bytes(out)


def main() -> None:
    source_text = SOURCE.read_text(encoding="utf-8")
    OUTPUT.parent.mkdir(parents=True, exist_ok=True)
    OUTPUT.write_bytes(build_pdf(source_text, TITLE))
    print(f"wrote {OUTPUT.relative_to(HERE.parent)}")


if __name__ == "__main__":
    main()
