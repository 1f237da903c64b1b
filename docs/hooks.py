"""mkdocs hooks: check the links that leave docs/, which mkdocs itself cannot follow.

A page links to the README, benchmarks/README.md, manifests/README.md or examples/ by a
relative path that reads right on the forge. mkdocs would call each of those "not found
among documentation files", so this hook checks that the target exists (and, for Markdown,
that the anchor is one of its headings) and hands the link to mkdocs as raw HTML, which it
leaves alone. It checks the links of those READMEs too, which are no pages of the site.
A broken link is a warning, so ``mkdocs build --strict`` fails on it.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path
from urllib.parse import unquote, urlsplit

from markdown.extensions.toc import slugify

log = logging.getLogger("mkdocs.hooks.links")  # under "mkdocs": --strict counts its warnings
LINK = re.compile(r"(!?)\[([^\]]*)\]\(([^)\s]+)\)")
HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*$")
EXPLICIT_ID = re.compile(r"<a\s+(?:id|name)=\"([^\"]+)\"")
READMES = ("README.md", "benchmarks/README.md", "manifests/README.md")


def _outside_fences(text: str):
    """(line number, line) of every line not inside a fenced code block."""
    fenced = False
    for number, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
        elif not fenced:
            yield number, line


def _anchors(path: Path) -> set[str]:
    found = set()
    for _, line in _outside_fences(path.read_text()):
        if heading := HEADING.match(line):
            found.add(slugify(heading.group(1).replace("`", ""), "-"))
        found.update(EXPLICIT_ID.findall(line))
    return found


def _problem(source: Path, url: str) -> str | None:
    """Why ``url`` in ``source`` leads nowhere, or None when it is fine."""
    parts = urlsplit(url)
    target = (source.parent / unquote(parts.path)).resolve() if parts.path else source
    if not target.exists():
        return "no such file"
    if parts.fragment and target.suffix == ".md" and parts.fragment not in _anchors(target):
        return f"{target.name} has no heading for #{parts.fragment}"
    return None


def _relative(url: str) -> bool:
    parts = urlsplit(url)
    return not (parts.scheme or parts.netloc or url.startswith("/"))


def on_pre_build(config) -> None:
    root = Path(config["config_file_path"]).parent
    for name in READMES:
        readme = root / name
        for number, line in _outside_fences(readme.read_text()):
            for _, _, url in LINK.findall(line):
                if _relative(url) and (problem := _problem(readme, url)):
                    log.warning(f"{name}:{number}: link {url}: {problem}")


def on_page_markdown(markdown: str, page, config, files) -> str:
    docs = Path(config["docs_dir"]).resolve()
    source = Path(page.file.abs_src_path)

    def leaving_docs(match: re.Match) -> str:
        image, text, url = match.groups()
        path = urlsplit(url).path
        if image or not path or not _relative(url):
            return match.group(0)
        if (source.parent / unquote(path)).resolve().is_relative_to(docs):
            return match.group(0)  # mkdocs checks it
        if problem := _problem(source, url):
            log.warning(f"{page.file.src_uri}: link {url}: {problem}")
        return f'<a href="{url}">{text}</a>'

    fenced, lines = False, []
    for line in markdown.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
        lines.append(line if fenced else LINK.sub(leaving_docs, line))
    return "\n".join(lines) + "\n"
