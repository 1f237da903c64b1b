"""The pages in docs/ build with `mkdocs build --strict` (make docs), and a link that leads
nowhere fails the build: inside docs/ mkdocs checks it, outside (the READMEs, examples/)
docs/hooks.py does."""

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def site_copy(target: Path) -> Path:
    """What the docs build reads: mkdocs.yml, docs/ (drafts left out), the READMEs, examples/."""
    shutil.copytree(ROOT / "docs", target / "docs", ignore=shutil.ignore_patterns("_pending"))
    shutil.copytree(ROOT / "examples", target / "examples")
    for name in ("mkdocs.yml", "README.md", "benchmarks/README.md", "manifests/README.md"):
        (target / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / name, target / name)
    return target


def build(root: Path) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", "site"]
    return subprocess.run(command, cwd=root, capture_output=True, text=True, timeout=300)


def test_the_docs_build_strict_and_a_broken_link_fails_them(tmp_path):
    root = site_copy(tmp_path)
    built = build(root)
    assert built.returncode == 0, built.stderr[-3000:]
    assert (root / "site" / "openshift" / "index.html").is_file()

    with (root / "README.md").open("a") as readme:
        readme.write("\nSee [usage](docs/usage.md#no-such-heading).\n")
    with (root / "docs" / "usage.md").open("a") as page:
        page.write("\nThe [store benchmark](../benchmarks/README.md#no-such-section) and ")
        page.write("[a space](../examples/no-such-space.yaml), [a page](no-such-page.md).\n")
    (root / "docs" / "orphan.md").write_text("# A page left out of nav\n")
    broken = build(root)
    assert broken.returncode == 1
    for expected in (
        "README.md:",
        "link docs/usage.md#no-such-heading: usage.md has no heading for #no-such-heading",
        "link ../benchmarks/README.md#no-such-section: README.md has no heading for",
        "link ../examples/no-such-space.yaml: no such file",
        "'no-such-page.md', but the target is not found",
        "orphan.md",
    ):
        assert expected in broken.stderr, (expected, broken.stderr[-3000:])
