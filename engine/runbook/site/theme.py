"""The site's theme: Jinja2 templates, static files and UI strings, from a `site/` directory.

Search order: $RUNBOOK_SITE_THEME, `./site`, then the built-in theme (the clone's `site/`
or a wheel's copy: see library/shipped.py). A theme directory holds `templates/`, `static/`
and `strings.yaml` (every UI string as `{en: ..., zh: ...}`).
"""

from __future__ import annotations

import os
from functools import cached_property
from pathlib import Path
from typing import Any

import yaml
from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape

from runbook.format import safeyaml
from runbook.format.model import LANGS
from runbook.library.shipped import shipped_dir


class ThemeError(RuntimeError):
    """The theme directory is missing or broken."""


def theme_dirs() -> list[Path]:
    dirs = [Path(os.environ["RUNBOOK_SITE_THEME"])] if os.environ.get("RUNBOOK_SITE_THEME") else []
    return [*dirs, Path.cwd() / "site", shipped_dir("site")]


def find_theme(explicit: Path | None = None) -> Path:
    for candidate in [explicit] if explicit else theme_dirs():
        if candidate and (candidate / "templates").is_dir() and (candidate / "strings.yaml").exists():
            return candidate
    where = explicit or " or ".join(str(d) for d in theme_dirs())
    raise ThemeError(f"no site theme (templates/ and strings.yaml) in {where}; "
                     "run from the repository root or set RUNBOOK_SITE_THEME")


class Theme:
    def __init__(self, root: Path) -> None:
        self.root = root

    @cached_property
    def env(self) -> Environment:
        # Autoescape everything: runbook and article texts are untrusted input.
        return Environment(loader=FileSystemLoader(self.root / "templates"),
                           autoescape=select_autoescape(default=True, default_for_string=True),
                           undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True)

    @cached_property
    def strings(self) -> dict[str, dict[str, str]]:
        """UI strings per language: strings[lang][key]."""
        path = self.root / "strings.yaml"
        try:
            raw: dict[str, Any] = safeyaml.load(path.read_text("utf-8")) or {}
        except yaml.YAMLError as exc:
            raise ThemeError(f"{path}: not valid YAML: {exc}") from exc
        out: dict[str, dict[str, str]] = {lang: {} for lang in LANGS}
        for key, texts in raw.items():
            for lang in LANGS:
                if not isinstance(texts, dict) or not texts.get(lang):
                    raise ThemeError(f"{path}: {key}: missing the {lang!r} text")
                out[lang][key] = str(texts[lang])
        return out

    def static_files(self) -> list[Path]:
        static = self.root / "static"
        return sorted(p for p in static.rglob("*") if p.is_file()) if static.is_dir() else []
