"""The docs' examples and the outputs they show (``make docs-outputs``).

Every fenced block of README.md and docs/*.md carries a mark on the line before it, an HTML
comment that renders nothing:

- ``<!-- runs in the suite -->``: tests/test_docs_examples.py runs its commands as written;
- ``<!-- checked: WHAT -->``: the suite reads it with the code that reads such text;
- ``<!-- output: make docs-outputs -->``: what the first command of the block before it
  prints, written by this script and compared by the suite;
- ``<!-- not run: WHY -->``: its ``ragsweep`` commands' options are still checked.

Run as a script, it runs each shown output's command in a scratch folder and writes what it
printed into the pages, with the other printed figures: the step line of docs/usage.md and
the built-in plugins of docs/extending.md, and docs/usage.md's tables of the run options
(``ragsweep.cli.options_table``).
"""

from __future__ import annotations

import configparser
import os
import re
import shlex
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ragsweep.cli import options_table

ROOT = Path(__file__).resolve().parent.parent
FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})\s*([\w-]*)")
MARK = re.compile(
    r"^\s*<!-- (runs in the suite|checked: .+|output: make docs-outputs|not run: .+) -->$"
)
SHELL = ("sh", "bash")
ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
STEP = re.compile(r"\[\d+/\d+\] chunk-embed: peak memory [^`]*?\)")
SHOWN_ROWS = 3  # a long leaderboard shows its first and last rows, "..." between


@dataclass(frozen=True)
class Block:
    page: Path
    line: int  # of the opening fence, from 1
    lang: str
    text: str  # its lines, the fence's indentation removed
    mark: str | None  # the comment's text, or None

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"

    @property
    def kind(self) -> str | None:
        """``runs``, ``checked``, ``output``, ``not run``, or None (unmarked)."""
        if self.mark is None:
            return None
        return self.mark.split(":")[0].removesuffix(" in the suite")


def pages() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("**/*.md"))]


def blocks(page: Path) -> list[Block]:
    """The fenced blocks of ``page``, each with the mark on the line before it."""
    lines = page.read_text(encoding="utf-8").splitlines()
    found, i = [], 0
    while i < len(lines):
        opening = FENCE.match(lines[i])
        if not opening:
            i += 1
            continue
        indent, fence, lang = opening.groups()
        end = i + 1
        while end < len(lines) and not lines[end].strip().startswith(fence):
            end += 1
        body = "\n".join(line[len(indent) :] for line in lines[i + 1 : end])
        mark = MARK.match(lines[i - 1]) if i else None
        found.append(Block(page, i + 1, lang, body, mark.group(1) if mark else None))
        i = end + 1
    return found


def commands(text: str) -> list[list[str]]:
    """The shell commands of a block, each as its words: continuation lines joined, comments
    dropped, split at ``;``, ``&&``, ``|`` and redirections (whose file is left out), with
    environment assignments before a command, ``export`` lines and ``do`` left out."""
    out = []
    for line in text.replace("\\\n", " ").splitlines():
        lexer = shlex.shlex(line, posix=True, punctuation_chars=";&|<>")
        lexer.whitespace_split = True
        current: list[str] = []
        redirected = False
        for word in [*lexer, ";"]:
            if set(word) <= set(";&|<>"):
                if current and not redirected and current[0] != "export":
                    out.append(current)
                current, redirected = [], word in (">", ">>", "<")
            elif current or not (ASSIGNMENT.match(word) or word in ("do", "then")):
                current.append(word)
    return out


def run_block(text: str, folder: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    """``text`` run by bash in ``folder``, stopping at the first command that fails; ``make
    X`` runs the Makefile's recipe for X (its commands, without the install it depends on)."""
    script = "\n".join(recipe(line) for line in text.splitlines())
    return subprocess.run(
        ["bash", "-e", "-o", "pipefail", "-c", script],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )


def recipe(line: str) -> str:
    """``line``, or for ``make TARGET`` the Makefile's recipe of TARGET, ragsweep's commands
    found on PATH."""
    called = re.match(r"^make (\w[\w-]*)", line.strip())
    if not called:
        return line
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    body = re.search(rf"^{called.group(1)}:.*\n((?:\t.*\n)+)", makefile, re.M)
    if body is None:
        raise ValueError(f"Makefile has no recipe for {called.group(1)}")
    return body.group(1).replace("\t", "").replace("$(BIN)/", "").strip()


def executable(text: str) -> str:
    """A block's text without its comment lines: what bash runs of it."""
    return "\n".join(x for x in text.splitlines() if not x.lstrip().startswith("#")).strip()


def first_command(block: Block) -> str:
    """The first command of ``block``, with its continuation lines (``make X``: its recipe)."""
    first = re.match(r"(?:.*\\\n)*.*", executable(block.text)).group(0)
    return recipe(first.strip())


def source_of(output: Block) -> Block:
    """The block whose first command prints ``output``: the shell block before it."""
    before = [b for b in blocks(output.page) if b.line < output.line and b.lang in SHELL]
    if not before or before[-1].kind == "output":
        raise ValueError(f"{output.where}: no command block before this output")
    return before[-1]


def leaderboard_excerpt(stdout: str) -> str:
    """What the pages show of a run's leaderboard: from its header to the line on what the
    intervals resample, a long table's middle rows as ``...``."""
    lines = stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("rank  "))
    end = next(i for i, line in enumerate(lines) if line.startswith("Intervals and tests"))
    shown = lines[start : end + 1]
    rows = [i for i, line in enumerate(shown) if re.match(r"^\s+\d+ ", line)]
    if len(rows) > 2 * SHOWN_ROWS:
        cut = rows[SHOWN_ROWS:-SHOWN_ROWS]
        shown = [*shown[: cut[0]], "  ...", *shown[cut[-1] + 1 :]]
    return "\n".join(shown)


def comparable(text: str) -> str:
    """``text`` without what changes from run to run of the same code and data: run folder
    names, the figures (a CPU's last bits can move them), step times and memory."""
    text = re.sub(r"\d{8}-\d{6}-\d{6}", "RUN", text)
    text = re.sub(r"\d+\.\d{3}", "#.###", text)
    return re.sub(r"(chunk-embed): peak memory .*", r"\1", text)


def step_line(stdout: str) -> str:
    """The chunk-embed step's line of a run's output, as docs/usage.md quotes it."""
    return STEP.search(stdout).group(0)


def built_in_plugins() -> dict[str, list[str]]:
    """ragsweep's own plugins per entry-point group, as its setup.cfg registers them."""
    config = configparser.ConfigParser()
    config.read(ROOT / "setup.cfg", encoding="utf-8")
    section = config["options.entry_points"]
    return {
        group: [line.split("=")[0].strip() for line in section[group].strip().splitlines()]
        for group in section
        if group.startswith("ragsweep.")
    }


def plugin_rows(page_text: str) -> dict[str, list[str]]:
    """The built-in column of docs/extending.md's table, per group."""
    rows = re.findall(r"^\| `(ragsweep\.\w+)` \| .* \| (.*) \|$", page_text, re.M)
    return {group: re.findall(r"`([^`]+)`", names) for group, names in rows}


def write_plugin_rows(page_text: str) -> str:
    def row(match: re.Match) -> str:
        names = built_in_plugins()[match.group(1)]
        return f"{match.group(0).rsplit(' | ', 1)[0]} | {', '.join(f'`{n}`' for n in names)} |"

    return re.sub(r"^\| `(ragsweep\.\w+)` \| .* \| (.*) \|$", row, page_text, flags=re.M)


def environment(folder: Path) -> dict[str, str]:
    """The commands' environment: this one with ragsweep's scripts first on PATH, no
    download (the bundled model), none of your ragsweep or MLflow settings but your caches,
    and a results database in ``folder``."""
    scripts = str(Path(sys.executable).parent)
    kept = ("RAGSWEEP_CACHE_DIR", "RAGSWEEP_EMBEDDING_CACHE")
    mine = {k: v for k, v in os.environ.items() if not k.startswith(("RAGSWEEP_", "MLFLOW_"))}
    return {
        **mine,
        **{k: os.environ[k] for k in kept if k in os.environ},
        "PATH": f"{scripts}{os.pathsep}{os.environ.get('PATH', '')}",
        "HF_HUB_OFFLINE": "1",
        "XDG_DATA_HOME": str(folder / "data"),
    }


def scratch(folder: Path) -> Path:
    """``folder`` set up as the examples' commands expect: examples/ in it."""
    (folder / "examples").symlink_to(ROOT / "examples")
    return folder


def replace_block(block: Block, text: str) -> None:
    """``block``'s lines in its page replaced by ``text``, at the fence's indentation."""
    lines = block.page.read_text(encoding="utf-8").splitlines(keepends=True)
    indent = re.match(r"\s*", lines[block.line - 1]).group(0)
    end = block.line + block.text.count("\n") + 1
    lines[block.line : end] = [f"{indent}{line}\n" if line else "\n" for line in text.split("\n")]
    block.page.write_text("".join(lines), encoding="utf-8")


def main() -> None:
    outputs = [b for page in pages() for b in blocks(page) if b.kind == "output"]
    printed: dict[str, str] = {}
    with tempfile.TemporaryDirectory() as folder:
        work = scratch(Path(folder))
        env = environment(work)
        for output in reversed(outputs):  # bottom up: a page's line numbers stay right
            command = first_command(source_of(output))
            if command not in printed:
                print(f"running {command}", file=sys.stderr)
                done = run_block(command, work, env)
                if done.returncode:
                    sys.exit(f"{command} failed:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
                printed[command] = done.stdout
            replace_block(output, leaderboard_excerpt(printed[command]))
    make_run = printed[recipe("make run").strip()]
    usage = ROOT / "docs" / "usage.md"
    page = STEP.sub(step_line(make_run), usage.read_text(encoding="utf-8"))
    usage.write_text(options_table.written(page), encoding="utf-8")  # the options' tables
    extending = ROOT / "docs" / "extending.md"
    extending.write_text(write_plugin_rows(extending.read_text(encoding="utf-8")), encoding="utf-8")


if __name__ == "__main__":
    main()
