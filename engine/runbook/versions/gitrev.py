"""A file as it was at a git revision (`git show REV:path`), for `runbook lint --base REV`.

The work tree is found from the file's own directory, so a private runbook
repository is compared with its own history, not with this project's.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path


class GitRevError(Exception):
    """Why a revision cannot be read, as one line that says what to do."""


@dataclass
class Revision:
    """One revision name, resolved lazily in every work tree a file belongs to."""

    rev: str
    _roots: dict[Path, Path] = field(default_factory=dict)  # directory -> work tree root
    _checked: set[Path] = field(default_factory=set)  # roots where `rev` is known to exist

    def read(self, file: Path) -> str | None:
        """The text of `file` at the revision, or None when the file did not exist there."""
        root = self._root(file.resolve().parent)
        self._check(root)
        relative = file.resolve().relative_to(root).as_posix()
        done = _git(root, "cat-file", "-e", f"{self.rev}:{relative}")
        if done.returncode != 0:
            return None
        shown = _git(root, "show", f"{self.rev}:{relative}")
        if shown.returncode != 0:
            raise GitRevError(f"cannot read {relative} at {self.rev}: {_first_line(shown.stderr)}")
        return shown.stdout

    def _root(self, directory: Path) -> Path:
        if directory not in self._roots:
            done = _git(directory, "rev-parse", "--show-toplevel")
            if done.returncode != 0 and "not a git repository" not in done.stderr:
                # e.g. a checkout owned by another user (safe.directory): say what git said
                raise GitRevError(f"git cannot use the repository of {directory}: "
                                  f"{_first_line(done.stderr)}")
            if done.returncode != 0:
                raise GitRevError(f"{directory} is not in a git work tree (compare files inside a "
                                  "git checkout, or lint without --base)")
            self._roots[directory] = Path(done.stdout.strip()).resolve()
        return self._roots[directory]

    def _check(self, root: Path) -> None:
        if root in self._checked:
            return
        # A name that starts with '-' would be read by git as an option.
        known = not self.rev.startswith("-") and _git(
            root, "rev-parse", "--verify", "--quiet", f"{self.rev}^{{commit}}").returncode == 0
        if not known:
            raise GitRevError(f"unknown revision {self.rev!r} in {root} (fetch it first, e.g. "
                              "`git fetch origin main`, or name a commit, branch or tag that exists)")
        self._checked.add(root)


def _git(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    if shutil.which("git") is None:
        raise GitRevError("git is not installed (install git, or lint without --base)")
    try:
        # Untranslated messages: the caller looks for "not a git repository".
        return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True,
                              encoding="utf-8", errors="replace", timeout=60,
                              env={**os.environ, "LC_ALL": "C"})
    except subprocess.TimeoutExpired:
        raise GitRevError(f"git {args[0]} took over 60 s in {cwd} (check the repository)") from None


def _first_line(text: str) -> str:
    return (text.strip().splitlines() or ["git failed"])[0]
