"""Text extraction: the text of a document file, by its suffix (``EXTRACTORS``).

Standalone (the standard library; pypdf and python-docx imported for their formats): this
file is also copied beside a pattern's scripts as ``extraction.py``, so a pattern reads
documents exactly as the sweep did.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from html.parser import HTMLParser


class UnreadableFile(Exception):
    """Raised by an extractor for a file it cannot read; the file is skipped with a warning."""


def extract_plain(data: bytes) -> str:
    """Strict UTF-8 text (a byte-order mark is dropped, CRLF line ends become LF)."""
    if b"\x00" in data:
        raise UnreadableFile("binary (contains NUL bytes)")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise UnreadableFile(f"not UTF-8 text (invalid byte at offset {exc.start})") from None
    return text.replace("\r\n", "\n")


# Paragraph-level elements are separated by a blank line, line-level ones by a newline.
_PARAGRAPH_TAGS = {
    *("address", "article", "aside", "blockquote", "details", "dialog", "div", "dl", "fieldset"),
    *("figure", "footer", "form", "h1", "h2", "h3", "h4", "h5", "h6", "header", "hr", "main"),
    *("nav", "ol", "p", "pre", "section", "table", "ul"),
}
_LINE_TAGS = {"br", "caption", "dd", "dt", "figcaption", "li", "summary", "tr"}
# A heading is kept as a Markdown one ("## Setup"): the headings chunker cuts at it.
_HEADINGS = {f"h{level}": level for level in range(1, 7)}
# <head> holds no text besides <title>, <script> and <style>, so skipping these and taking the
# title drops it, even when a page never closes its <head>.
_SKIPPED_TAGS = {"script", "style", "noscript", "template"}


class _HTMLText(HTMLParser):
    """Collects the title and the visible text, paragraph by paragraph."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.title: list[str] = []
        self.parts: list[str] = []
        self._inline: list[str] = []
        self._break = 0  # the strongest break seen since the last text: 0, 1 or 2 newlines
        self._skipping = 0
        self._in_title = False
        self._in_pre = 0
        self._heading = 0  # inside <h1>..<h6>: its level

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in _SKIPPED_TAGS:
            self._skipping += 1
        elif tag == "title":
            self._in_title = True
        elif tag in ("td", "th"):
            self._inline.append(" ")
        else:
            self._block_boundary(tag)
            if tag == "pre":
                self._in_pre += 1
            elif tag in _HEADINGS:
                self._heading = _HEADINGS[tag]

    def handle_endtag(self, tag: str) -> None:
        if tag in _SKIPPED_TAGS:
            self._skipping = max(0, self._skipping - 1)
        elif tag == "title":
            self._in_title = False
        else:
            self._block_boundary(tag)
            if tag == "pre":
                self._in_pre = max(0, self._in_pre - 1)
            elif tag in _HEADINGS:
                self._heading = 0

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self.title.append(data)
        elif not self._skipping:
            self._inline.append(data)

    def _block_boundary(self, tag: str) -> None:
        level = 2 if tag in _PARAGRAPH_TAGS else 1 if tag in _LINE_TAGS else 0
        if level:
            self.flush()
            self._break = max(self._break, level)

    def flush(self) -> None:
        raw = "".join(self._inline)
        self._inline = []
        text = raw.strip("\n").rstrip() if self._in_pre else " ".join(raw.split())
        if text and self._heading:
            text = f"{'#' * self._heading} {text}"
        if text:
            if self.parts:
                self.parts.append("\n" * max(self._break, 1))
            self.parts.append(text)
            self._break = 0


def extract_html(data: bytes) -> str:
    """Visible text: the title first, then one paragraph per block, blank-line separated;
    headings as Markdown ones."""
    parser = _HTMLText()
    parser.feed(extract_plain(data))
    parser.close()
    parser.flush()
    title = " ".join("".join(parser.title).split())
    body = "".join(parser.parts)
    return f"{title}\n\n{body}" if title and body else title or body


def extract_pdf(data: bytes) -> str:
    """The text layer of every page, pages joined by newlines."""
    import pypdf  # here: every step reading the cache imports this module

    try:
        reader = pypdf.PdfReader(io.BytesIO(data))
        return "\n".join(page.extract_text() or "" for page in reader.pages)
    except Exception as exc:  # pypdf raises many exception types on damaged files
        raise UnreadableFile(f"not a readable PDF ({type(exc).__name__}: {exc})") from None


def extract_docx(data: bytes) -> str:
    """The paragraphs of a Word document, one a line."""
    import docx

    try:
        document = docx.Document(io.BytesIO(data))
    except Exception as exc:  # a damaged zip or part fails with many exception types
        raise UnreadableFile(f"not a readable .docx ({type(exc).__name__}: {exc})") from None
    return "\n".join(paragraph.text for paragraph in document.paragraphs)


EXTRACTORS: dict[str, Callable[[bytes], str]] = {
    ".txt": extract_plain,
    ".md": extract_plain,
    ".rst": extract_plain,
    ".html": extract_html,
    ".htm": extract_html,
    ".pdf": extract_pdf,
    ".docx": extract_docx,
}
