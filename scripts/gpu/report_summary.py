#!/usr/bin/env python3
"""One line per node of each runbook-report/v1 JSON file: status, conclusion, severity, taxonomy,
path and finding (what scripts/gpu-check.sh and scripts/gpu-verdicts.sh print as they go).

    python3 scripts/gpu/report_summary.py REPORT.json [...]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def main(paths: list[str]) -> int:
    for path in paths:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
        for node in doc.get("nodes", []):
            c = node.get("conclusion") or {}
            print(f"   {Path(path).name} {node['node']}: {node['status']} {c.get('id')} "
                  f"({c.get('severity')}, {c.get('taxonomy')}) exit {doc['summary']['exit_code']}; "
                  f"path {' > '.join(node.get('path') or [])}")
            finding = node.get("finding") or c.get("finding")
            if finding:
                print(f"      {c.get('title')}: {finding}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
