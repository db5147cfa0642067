"""mkdocs hook: the reference pages generated from the code, and the pages other people write.

``on_files`` adds ``reference/*.md`` (rendered by :mod:`refgen`) to the site, so
``mkdocs build`` always documents the code it runs next to. A name the code holds without the
text the page needs for it (an error kind without advice, a metric or variable without a note,
a config field without a description, an example naming an option that does not exist) is
logged as a warning: ``mkdocs build --strict`` (``make test``) then fails and says which.

``on_config`` drops from the nav the pages listed in ``OPTIONAL_PAGES`` that are not written
yet, and ``on_page_markdown`` turns links to them into plain text, so the site builds (strict)
before and after their authors add them.
"""

from __future__ import annotations

import logging
import posixpath
import re
from pathlib import Path

from mkdocs.structure.files import File
from refgen import cli_ref, config_ref, env_vars_ref, errors_ref, metrics_ref, outputs_ref

log = logging.getLogger("mkdocs.hooks.reference_pages")

PAGES = {
    "reference/config.md": config_ref,
    "reference/cli.md": cli_ref,
    "reference/errors.md": errors_ref,
    "reference/metrics.md": metrics_ref,
    "reference/environment-variables.md": env_vars_ref,
    "reference/outputs.md": outputs_ref,
}
"""Generated page -> the module that renders it (``page()``) and checks it (``problems()``)."""

OPTIONAL_PAGES = (
    "concepts/sandbox.md",
    "concepts/gate.md",
    "how-to/external-agents.md",
    "how-to/gpu-and-vllm.md",
)
"""Pages in the nav that other engineers write; left out of the nav while they are missing."""


def _prune(items: list, docs_dir: Path) -> list:
    kept = []
    for item in items:
        if isinstance(item, dict):
            ((title, value),) = item.items()
            if isinstance(value, list):
                value = _prune(value, docs_dir)
                if not value:
                    continue
            elif value in OPTIONAL_PAGES and not (docs_dir / value).exists():
                log.info("nav: %s is not written yet; left out", value)
                continue
            kept.append({title: value})
        elif isinstance(item, str) and item in OPTIONAL_PAGES and not (docs_dir / item).exists():
            log.info("nav: %s is not written yet; left out", item)
        else:
            kept.append(item)
    return kept


def on_config(config):
    if config.nav:
        config.nav = _prune(config.nav, Path(config.docs_dir))
    return config


def on_files(files, config):
    for path, module in PAGES.items():
        for problem in module.problems():
            log.warning(
                "reference: %s (docs/hooks/refgen/%s.py)", problem, module.__name__.split(".")[-1]
            )
        for note in module.unused():
            log.info("reference: %s", note)
        files.append(File.generated(config, path, content=module.page()))
    missing = cli_ref.missing_examples()
    if missing:
        log.info(
            "reference: commands shown with their usage for want of an example: %s",
            ", ".join(missing),
        )
    return files


_LINK = re.compile(r"\[([^\]]+)\]\(([^)\s#]+\.md)(#[^)\s]*)?\)")


def on_page_markdown(markdown, page, config, files):
    """Links to an optional page not written yet become their text."""
    docs_dir = Path(config.docs_dir)
    here = posixpath.dirname(page.file.src_uri)

    def unlink(match: re.Match) -> str:
        target = posixpath.normpath(posixpath.join(here, match.group(2)))
        if target in OPTIONAL_PAGES and not (docs_dir / target).exists():
            return match.group(1)
        return match.group(0)

    return _LINK.sub(unlink, markdown)
