"""The document roots: the folders and ``s3://`` prefixes under which the runs and test-set
generations started from the page may read documents (``ragsweep ui --docs-root``). Whatever
a run reads ends up in its results and drill-downs, so a token holder must not be able to
point one at any file of the host."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ragsweep.core.errors import RagsweepError


def _s3(location: str) -> str:
    """``s3://bucket/prefix`` ending in one '/', refused when a part is '..' or '.'."""
    if any(part in ("..", ".") for part in location.removeprefix("s3://").split("/")):
        raise RagsweepError(f"{location}: an s3:// location cannot hold '.' or '..' parts")
    return location.rstrip("/") + "/"


@dataclass(frozen=True)
class DocRoots:
    """Local folders (resolved, symbolic links followed) and ``s3://`` prefixes."""

    folders: tuple[Path, ...] = ()
    prefixes: tuple[str, ...] = ()

    @classmethod
    def of(cls, roots: Sequence[str]) -> DocRoots:
        """The roots given (``--docs-root``); a folder must exist. ``s3://`` alone allows
        every bucket this server's credentials can read."""
        folders, prefixes = [], []
        for root in roots:
            if root.startswith("s3://"):
                prefixes.append("s3://" if root == "s3://" else _s3(root))
                continue
            folder = Path(root).expanduser().resolve()
            if not folder.is_dir():
                raise RagsweepError(f"--docs-root {root}: no such folder")
            folders.append(folder)
        return cls(tuple(folders), tuple(prefixes))

    @classmethod
    def default(cls) -> DocRoots:
        """The folder the server was started in, unless that is the file system's root."""
        here = Path.cwd().resolve()
        return cls((here,) if here != Path(here.anchor) else ())

    def describe(self) -> str:
        shown = [str(f) for f in self.folders] + list(self.prefixes)
        return ", ".join(shown) or "none"

    def check(self, docs: str) -> str:
        """``docs`` as the run is to read it (a local folder resolved), when it lies under
        a root; else a clear error naming the roots."""
        if docs.startswith("s3://"):
            allowed = any(_s3(docs).startswith(p) for p in self.prefixes)
        else:
            docs = str(Path(docs).expanduser().resolve())
            allowed = any(Path(docs).is_relative_to(f) for f in self.folders)
        if not allowed:
            raise RagsweepError(
                f"docs: {docs} is outside the document roots this ui allows "
                f"({self.describe()}); its operator widens them with `ragsweep ui --docs-root`"
            )
        return docs
