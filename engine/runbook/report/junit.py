"""`--format junit`: JUnit XML, so a CI system or a dashboard shows each node as a test case.

One test suite for the run, one test case per node: a warning or critical conclusion is
a failure, a node that could not be diagnosed (unreachable, timeout, error) an error.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import Any

from runbook.report.build import PROBLEM_SEVERITIES
from runbook.report.silent import SilentReporter
from runbook.run.walk import CONCLUDED


class JunitReporter(SilentReporter):
    def render(self, report: dict[str, Any]) -> str:
        rb, nodes = report["runbook"], report["nodes"]
        jobs = [j for j in report["summary"].get("job") or [] if j.get("problem")]
        failures = [n for n in nodes if (n.get("conclusion") or {}).get("severity") in PROBLEM_SEVERITIES]
        errors = [n for n in nodes if n["status"] != CONCLUDED]
        suite = ET.Element("testsuite", name=f"runbook {rb['id']} {rb['version']}",
                           tests=str(len(nodes) + len(jobs)), failures=str(len(failures) + len(jobs)),
                           errors=str(len(errors)),
                           time=f"{report['duration_s']:.3f}", timestamp=report["started_at"])
        properties = ET.SubElement(suite, "properties")
        summary = report["summary"]
        incomplete = [("incomplete", summary["reason"])] if summary.get("incomplete") else []
        for name, value in (("digest", rb["digest"]), *incomplete, *((f"param.{k}", v) for k, v in
                                                                     sorted(report["params"].items()))):
            ET.SubElement(properties, "property", name=name, value=str(value))
        for job in jobs:  # the job's verdict first: a test case of its own
            case = ET.SubElement(suite, "testcase", classname=rb["id"], name=f"job: {job['step']}",
                                 time="0")
            ET.SubElement(case, "failure", type=str(job["verdict"]), message=job["finding"]).text = (
                f"{job['analysis']} · {', '.join(job['taxonomy'])}\nhosts: {', '.join(job['hosts'])}")
        for n in nodes:
            seconds = sum(e["duration_s"] for e in n["evidence"])
            case = ET.SubElement(suite, "testcase", classname=rb["id"], name=n["node"],
                                 time=f"{seconds:.3f}")
            c = n.get("conclusion")
            path = " → ".join(n["path"])
            if n["status"] != CONCLUDED:
                ET.SubElement(case, "error", type=n["status"],
                              message=n.get("reason") or n["status"]).text = f"path: {path}"
            elif c and c["severity"] in PROBLEM_SEVERITIES:
                finding = f"{n['finding']}\n" if n.get("finding") else ""
                ET.SubElement(case, "failure", type=c["id"], message=n.get("finding") or c["title"]).text = (
                    f"{finding}{c['severity']} · {', '.join(c['taxonomy'])}\npath: {path}\n\n"
                    f"{c['explanation']}")
            ET.SubElement(case, "system-out").text = (
                f"{c['id']}: {c['title']}\npath: {path}" if c else f"path: {path}")
        ET.indent(suite)
        return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(suite, encoding="unicode") + "\n"
