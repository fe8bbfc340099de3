import argparse

from runbook.cli.common_args import add_lang


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("id", help="runbook id, e.g. training-hang")
    where = parser.add_argument_group("nodes")
    where.add_argument("--nodes", help="nodes: a,b  gpu[001-064]  @hostfile  localhost "
                       "(default: this machine)")
    where.add_argument("--inventory", "-i", help="inventory file: ours (YAML) or Ansible INI/YAML")
    where.add_argument("--group", "-g", help="the inventory group to diagnose (default: all hosts)")
    where.add_argument("--executor", choices=("local", "ssh", "ray"), default=None,
                       help="how to reach nodes (default: local for localhost, ssh otherwise)")
    where.add_argument("--ray-address", help="Ray cluster address for --executor ray "
                       "(default: auto, the cluster this machine belongs to)")
    where.add_argument("--python", help="the Python that runs the probe on nodes "
                       "(default: python3; use the training environment's)")
    where.add_argument("--connect-timeout", type=float, default=10.0, metavar="S",
                       help="SSH connect timeout per node (default 10)")
    where.add_argument("--accept-new-host-keys", action="store_true",
                       help="accept SSH host keys missing from known_hosts (default: refuse)")
    parser.add_argument("--set", dest="sets", action="append", default=[], metavar="NAME=VALUE",
                        help="a runbook parameter, e.g. --set log=train.log (repeatable)")
    parser.add_argument("--format", choices=("text", "json"), default="text")
    parser.add_argument("--output", "-o", help="write the report to this file")
    add_lang(parser)
    parser.add_argument("--forks", type=int, default=256,
                        help="checks run at once across nodes (default 256)")
    parser.add_argument("--timeout", type=float, default=300.0, metavar="S",
                        help="deadline for the whole run in seconds (default 300)")
