"""Build step that copies the built-in runbooks, knowledge base and site theme into the wheel.

Everything else about the package is in pyproject.toml. An editable install reads the
repository's folders directly (see engine/runbook/library/shipped.py), so it copies nothing.
"""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
SHIPPED = ("runbooks", "kb", "site")  # keep in step with engine/runbook/library/shipped.py


class BuildWithLibrary(build_py):
    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False):
            return
        target = Path(self.build_lib) / "runbook" / "_shipped"
        for name in SHIPPED:
            if (ROOT / name).is_dir():
                shutil.copytree(ROOT / name, target / name, dirs_exist_ok=True,
                                ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))


setup(cmdclass={"build_py": BuildWithLibrary})
