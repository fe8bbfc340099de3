"""alerts/routing.py and alerts/hosts.py: which runbook an alert runs, where, with what."""

from __future__ import annotations

from pathlib import Path

import pytest

from runbook.alerts.hosts import HostMap, host_of, ssh_aliases
from runbook.alerts.payload import Alert
from runbook.alerts.routing import RoutingError, RunRequest, Unmapped, load_router

KNOWN = {"nan-loss", "training-hang", "gpu-hardware"}
ROUTES = """\
site: https://runbooks.example.com/
routes:
  - match: {alertname: [DCGMXidError, DCGMEccDoubleBit]}
    runbook: gpu-hardware
  - match: {alertname: TrainingLogSilent, cluster: a}
    runbook: training-hang
    params:
      log: {label: log_path}
      stall_after: {annotation: silent_for, default: 600}
      match: python
    fixes: read-only
  - match: {team: ml}
    params:
      log: {annotation: log}
"""


# Aliases nested six deep: a few hundred bytes that would expand to a million values.
BOMB = "l0: &l0 [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 10)}]\n" for i in range(1, 7))


def alert(labels: dict[str, str], annotations: dict[str, str] | None = None) -> Alert:
    return Alert("firing", labels, annotations or {}, "2026-03-01T10:15:00Z", "0001-01-01T00:00:00Z", "f1")


@pytest.fixture
def router(tmp_path: Path):  # type: ignore[no-untyped-def]
    path = tmp_path / "routes.yaml"
    path.write_text(ROUTES)
    inventory = {"gpu01": {}, "gpu02": {"host": "10.0.0.2"}}
    return load_router(path, KNOWN, HostMap(inventory, {"10.0.0.9": "gpu09"}))


def test_a_route_gives_the_runbook_and_parameters_from_labels_annotations_and_defaults(router) -> None:  # type: ignore[no-untyped-def]
    got = router.route(alert({"alertname": "TrainingLogSilent", "cluster": "a", "instance": "gpu01:9100",
                              "log_path": "/logs/train.log"}))
    assert got == RunRequest("training-hang", ["gpu01"], None,
                             {"log": "/logs/train.log", "stall_after": "600", "match": "python"}, "read-only")
    with_annotation = router.route(alert({"alertname": "TrainingLogSilent", "cluster": "a", "node": "gpu01"},
                                         {"silent_for": "300"}))
    assert with_annotation.params == {"stall_after": "300", "match": "python"}  # no log_path: left out
    assert isinstance(router.route(alert({"alertname": "TrainingLogSilent", "cluster": "b",
                                          "node": "gpu01"})), Unmapped)


@pytest.mark.parametrize(("annotations", "labels", "expected"), [
    ({"runbook_url": "https://runbooks.example.com/en/runbooks/nan-loss/"}, {}, "nan-loss"),
    ({"runbook_url": "https://runbooks.example.com/zh/runbooks/nan-loss/index.html"}, {}, "nan-loss"),
    ({"runbook_url": "https://wiki.example.com/runbooks/nan-loss/"}, {}, None),  # not our site
    ({"runbook_url": "runbook:training-hang"}, {}, "training-hang"),
    ({"runbook_url": "training-hang"}, {}, "training-hang"),
    ({"runbook": "nan-loss"}, {}, "nan-loss"),
    ({}, {"runbook": "nan-loss"}, "nan-loss"),
    ({"runbook_url": "https://wiki.example.com/oncall"}, {"runbook": "nan-loss"}, "nan-loss"),
])
def test_the_alert_names_its_runbook(router, annotations, labels, expected) -> None:  # type: ignore[no-untyped-def]
    got = router.route(alert({"alertname": "Custom", "node": "gpu01", **labels}, annotations))
    if expected is None:
        assert isinstance(got, Unmapped)
    else:
        assert isinstance(got, RunRequest) and got.runbook == expected and got.fixes == "none"


def test_a_route_without_a_runbook_gives_parameters_to_an_alert_that_names_one(router) -> None:  # type: ignore[no-untyped-def]
    got = router.route(alert({"alertname": "X", "team": "ml", "node": "gpu01", "runbook": "nan-loss"},
                             {"log": "/l"}))
    assert (got.runbook, got.params) == ("nan-loss", {"log": "/l"})


@pytest.mark.parametrize(("labels", "why"), [
    ({"alertname": "Nothing", "node": "gpu01"}, "no route matches"),
    ({"alertname": "X", "runbook": "no-such-runbook", "node": "gpu01"}, "library does not have"),
    ({"alertname": "DCGMXidError"}, "no label names a node"),
    ({"alertname": "DCGMXidError", "node": "-oProxyCommand=touch /tmp/x"}, "no label names a node"),
    ({"alertname": "DCGMXidError", "instance": "gpu[01-64]:9100"}, "no label names a node"),
])
def test_an_alert_that_maps_to_nothing_says_why(router, labels, why) -> None:  # type: ignore[no-untyped-def]
    got = router.route(alert(labels))
    assert isinstance(got, Unmapped) and why in got.reason


@pytest.mark.parametrize(("labels", "node"), [
    ({"instance": "gpu01:9100"}, "gpu01"),
    ({"instance": "gpu01.cluster.example.com:9100"}, "gpu01"),  # the inventory's short name
    ({"instance": "10.0.0.2:9400"}, "gpu02"),  # the inventory's `host` (ansible_host)
    ({"instance": "10.0.0.9:9100"}, "gpu09"),  # ~/.ssh/config's HostName
    ({"instance": "10.0.0.7:9100"}, "10.0.0.7"),  # unknown: ssh resolves it
    ({"instance": "[fd00::7]:9100"}, "fd00::7"),
    ({"instance": "https://gpu01/probe"}, "gpu01"),  # blackbox: the probed URL
    ({"Hostname": "gpu02", "instance": "10.1.2.3:9400"}, "gpu02"),  # DCGM: the name wins
    ({"nodename": "gpu01", "instance": "x:9100"}, "gpu01"),
])
def test_the_node_is_named_as_the_inventory_and_ssh_config_name_it(router, labels, node) -> None:  # type: ignore[no-untyped-def]
    got = router.route(alert({"alertname": "DCGMXidError", **labels}))
    assert got.nodes == [node]


def test_a_slurm_job_label_runs_on_the_job() -> None:
    got = load_router(None, KNOWN).route(alert({"alertname": "X", "runbook": "training-hang",
                                                "slurm_job_id": "4242", "instance": "gpu01:9100"}))
    assert (got.nodes, got.slurm_job) == ([], "4242")


@pytest.mark.parametrize(("text", "why"), [
    ("routes:\n  - match: {alertname: A}\n    runbook: nan-loss\n    fixes: changes-state\n",
     "routes[0].fixes: 'changes-state': an alert's run may apply read-only fixes at most"),
    ("routes:\n  - match: {alertname: A}\n    runbook: nan-loss\n    fixes: disruptive\n",
     "read-only fixes at most"),
    ("routes:\n  - match: {alertname: A}\n    runbook: nan-los\n",
     "routes[0].runbook: no runbook named 'nan-los'"),
    ("routes:\n  - runbook: nan-loss\n", "routes[0].match: expected label: value pairs"),
    ("routes:\n  - match: {a: b}\n    params: {log: {label: x, annotation: y}}\n", "routes[0].params.log"),
    ("routes: [\n", "YAML syntax error"),
    ("site: ftp://x\n", "site:"),
    ("routes: 1\nunknown: 2\n", "expected a mapping with `site` and `routes`"),
    (BOMB, "more than 100,000 values"),
])
def test_a_routing_file_that_cannot_be_used_is_one_line(tmp_path: Path, text: str, why: str) -> None:
    path = tmp_path / "routes.yaml"
    path.write_text(text)
    with pytest.raises(RoutingError) as refused:
        load_router(path, KNOWN)
    assert why in str(refused.value) and str(path) in str(refused.value)


def test_ssh_config_aliases_skip_patterns(tmp_path: Path) -> None:
    config = tmp_path / "config"
    config.write_text("Host gpu01 g1\n    HostName 10.0.0.1\nHost 10.0.*\n    HostName 10.9.9.9\n"
                      "Host gpu02\n  HostName=10.0.0.2\n")
    assert ssh_aliases(config) == {"10.0.0.1": "gpu01", "10.0.0.2": "gpu02"}
    assert ssh_aliases(tmp_path / "missing") == {}
    assert host_of({"instance": "a:1:2"}) is None  # neither host:port nor an address


def test_the_documented_rules_and_routes_fit_the_library() -> None:
    """docs/alerts/rules.yml's alerts, as Alertmanager would send them, run the runbook they name
    with the parameters docs/alerts/routes.yaml gives."""
    import yaml

    from runbook.library.lazy import open_library

    docs = Path(__file__).resolve().parents[2] / "docs" / "alerts"
    router = load_router(docs / "routes.yaml", set(open_library().by_id))
    groups = yaml.safe_load((docs / "rules.yml").read_text())["groups"]
    rules = [rule for group in groups for rule in group["rules"]]
    assert len(rules) >= 4
    for rule in rules:
        labels = {"alertname": rule["alert"], "Hostname": "gpu01", "log_path": "/l", **rule["labels"]}
        got = router.route(alert(labels, rule["annotations"]))
        assert isinstance(got, RunRequest), (rule["alert"], got)
        assert got.runbook == router.runbook_named_by(alert(labels, rule["annotations"]))
    labels = {"alertname": "TrainingLogSilent", "instance": "gpu01:9100", "log_path": "/l"}
    silent = router.route(alert(labels, {"stall_after": "900"}))
    assert (silent.runbook, silent.params) == ("training-hang", {"log": "/l", "stall_after": "900"})
    assert silent.fixes == "read-only"
