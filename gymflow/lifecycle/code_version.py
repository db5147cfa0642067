"""Which code made a run: the git commit of the checkout, else the installed package version."""

from __future__ import annotations

import functools
import subprocess
from pathlib import Path


@functools.cache
def code_version() -> str:
    """``git:<commit>`` (``+dirty`` when tracked files changed) of the checkout this package
    runs from; ``gymflow==<version>`` when it is not a git checkout or git is missing."""
    root = Path(__file__).resolve().parents[2]
    try:
        commit = _git(root, "rev-parse", "HEAD")
        dirty = _git(root, "status", "--porcelain", "--untracked-files=no")
    except (OSError, subprocess.SubprocessError):
        from importlib.metadata import PackageNotFoundError, version

        try:
            return f"gymflow=={version('gymflow')}"
        except PackageNotFoundError:
            return "unknown"
    return f"git:{commit[:12]}" + ("+dirty" if dirty else "")


def _git(root: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(root), *args], capture_output=True, text=True, timeout=10, check=True
    )
    return done.stdout.strip()
