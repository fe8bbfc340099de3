"""Where the folders that ship with runbook live: the runbook library, the knowledge base, the site theme.

In a clone (an editable install) they are the repository's own `runbooks/`, `kb/` and
`site/`. A built wheel carries copies inside the package, in `runbook/_shipped/`
(written by `setup.py` at build time), so `pip install runbook` or a pre-commit hook in
a team's private repository still finds the built-in runbooks, articles and theme.
"""

from __future__ import annotations

from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parents[1]  # the `runbook` package
SHIPPED = ("runbooks", "kb", "site")


def shipped_dir(name: str) -> Path:
    """The folder `name` (one of SHIPPED): the wheel's copy when there is one, else the clone's."""
    bundled = PACKAGE_DIR / "_shipped" / name
    return bundled if bundled.is_dir() else PACKAGE_DIR.parents[1] / name
