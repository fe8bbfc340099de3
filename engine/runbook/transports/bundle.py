"""The probe bundle: a zipapp of `runbook.probe` + `runbook.checks`, named by content hash.

Every transport runs this same file with the node's Python, so a check behaves
the same locally, over SSH and through Ray. A node that already holds a bundle
of this hash is sent nothing new.
"""

from __future__ import annotations

import hashlib
import io
import os
import threading
import zipfile
from functools import lru_cache
from pathlib import Path

_PACKAGE_DIR = Path(__file__).resolve().parents[1]
_MAIN = "from runbook.probe import main\nimport sys\nsys.exit(main())\n"
# lru_cache does not make concurrent first callers wait: without this, every node's thread that
# asks before the first build ends would zip the sources anew.
_BUILDING = threading.Lock()


def _sources() -> list[tuple[str, bytes]]:
    """Every module of `probe/` and `checks/`, subpackages included, in sorted path order."""
    files = [("runbook/__init__.py", (_PACKAGE_DIR / "__init__.py").read_bytes())]
    for sub in ("probe", "checks"):
        # .json: data a check reads on the node (the table of known regressions)
        names = sorted(p.relative_to(_PACKAGE_DIR).as_posix() for pattern in ("*.py", "*.json")
                       for p in (_PACKAGE_DIR / sub).rglob(pattern))
        files.extend((f"runbook/{name}", (_PACKAGE_DIR / name).read_bytes()) for name in names)
    files.append(("__main__.py", _MAIN.encode()))
    return files


def bundle_bytes() -> bytes:
    """The zip's bytes; fixed timestamps so the same sources give the same hash. Built once,
    whichever thread asks first; the others wait for it."""
    with _BUILDING:
        return _build()


@lru_cache(maxsize=1)
def _build() -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in _sources():
            info = zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, data)
    return buffer.getvalue()


@lru_cache(maxsize=1)
def bundle_name() -> str:
    return f"runbook-probe-{hashlib.sha256(bundle_bytes()).hexdigest()[:16]}.pyz"


def local_bundle() -> Path:
    """The bundle written once into this machine's cache directory."""
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "runbook"
    target = cache / bundle_name()
    if not target.exists():
        cache.mkdir(parents=True, exist_ok=True)
        tmp = target.with_suffix(f".tmp{os.getpid()}")
        tmp.write_bytes(bundle_bytes())
        tmp.replace(target)
    return target
