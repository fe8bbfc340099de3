"""CLI: python3 -m scenarios {list | start NAME --dir DIR [--speed F] | stop --dir DIR | status --dir DIR}."""

from __future__ import annotations

import argparse
import json
import sys

from scenarios.jobs import SCENARIOS, ScenarioError, load, start, stop_dir


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m scenarios",
                                 description="Start and stop scenario training jobs.")
    sub = ap.add_subparsers(dest="cmd", required=True)
    p_list = sub.add_parser("list", help="list the scenarios")
    p_list.add_argument("--json", action="store_true", help="print the registry as JSON")
    p_start = sub.add_parser("start", help="start a scenario detached; print its scenario.json")
    p_start.add_argument("name", choices=sorted(SCENARIOS))
    p_start.add_argument("--dir", required=True, help="work directory (log, data, scenario.json)")
    p_start.add_argument("--speed", type=float, default=1.0,
                         help="how much faster than real life (loader: first batch at ~120s/speed)")
    p_start.add_argument("--env", action="append", default=[], metavar="KEY=VALUE",
                         help="extra environment for the job (repeatable), e.g. RANK=1")
    p_stop = sub.add_parser("stop", help="kill the scenario recorded in --dir (whole group)")
    p_stop.add_argument("--dir", required=True)
    p_status = sub.add_parser("status", help="print the recorded scenario and whether it runs")
    p_status.add_argument("--dir", required=True)
    args = ap.parse_args(argv)

    try:
        if args.cmd == "list":
            if args.json:
                print(json.dumps({n: {"description": s.description, "taxonomy": s.taxonomy,
                                      "severity": s.severity, "seed": s.seed,
                                      "related": list(s.related)}
                                  for n, s in SCENARIOS.items()}, indent=2, ensure_ascii=False))
            else:
                for n, s in SCENARIOS.items():
                    print(f"{n:<22} {s.taxonomy or '(healthy: ' + str(s.severity) + ')':<18} "
                          f"{s.description['en']}")
        elif args.cmd == "start":
            env = dict(kv.split("=", 1) for kv in args.env)
            scenario = start(args.name, args.dir, speed=args.speed, env=env)
            print(json.dumps(scenario.to_json(), indent=2, ensure_ascii=False))
        elif args.cmd == "stop":
            scenario = stop_dir(args.dir)
            print(json.dumps({"stopped": True, "name": scenario.name, "pgid": scenario.pgid}))
        elif args.cmd == "status":
            scenario = load(args.dir)
            print(json.dumps({**scenario.to_json(), "alive": scenario.is_alive()},
                             indent=2, ensure_ascii=False))
    except ScenarioError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
