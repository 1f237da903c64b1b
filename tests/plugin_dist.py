"""Installed packages made by hand: a ``<name>.dist-info`` folder with ``METADATA`` and
``entry_points.txt`` is what ``importlib.metadata`` reads, so a folder holding one, put on
``sys.path`` (or a subprocess's ``PYTHONPATH``), registers entry points with no pip."""

from __future__ import annotations

import configparser
from pathlib import Path


def write_dist(folder: Path, name: str, groups: dict[str, dict[str, str]]) -> Path:
    """``folder/<name>-0.dist-info`` declaring ``groups`` (group -> name -> "module:attr")."""
    dist = folder / f"{name}-0.dist-info"
    dist.mkdir(parents=True, exist_ok=True)
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0\n")
    lines = []
    for group, points in groups.items():
        lines.append(f"[{group}]")
        lines += [f"{key} = {value}" for key, value in points.items()]
        lines.append("")
    (dist / "entry_points.txt").write_text("\n".join(lines))
    return dist


def declared(setup_cfg: Path) -> dict[str, dict[str, str]]:
    """The entry points a ``setup.cfg`` declares, by group."""
    parser = configparser.ConfigParser()
    parser.read(setup_cfg)
    section = parser["options.entry_points"]
    return {
        group: dict(
            (key.strip(), value.strip())
            for key, _, value in (line.partition("=") for line in text.splitlines())
            if key.strip()
        )
        for group, text in section.items()
    }
