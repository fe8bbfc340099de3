"""alerts/payload.py: Alertmanager's version-4 body, parsed; every refusal one line."""

from __future__ import annotations

import json

import pytest

from runbook.alerts.payload import MAX_ALERTS, PayloadError, parse_notification

# As Alertmanager 0.25 sends it (nanoseconds in startsAt, the zero time in endsAt).
BODY = {
    "receiver": "runbook", "status": "firing", "version": "4", "truncatedAlerts": 0,
    "groupKey": '{}:{alertname="TrainingLossNaN"}', "externalURL": "http://am:9093",
    "groupLabels": {"alertname": "TrainingLossNaN"}, "commonLabels": {}, "commonAnnotations": {},
    "alerts": [
        {"status": "firing", "labels": {"alertname": "TrainingLossNaN", "instance": "gpu01:9100"},
         "annotations": {"summary": "NaN"}, "startsAt": "2026-03-01T10:15:00.739266876+02:00",
         "endsAt": "0001-01-01T00:00:00Z", "generatorURL": "http://prom/graph",
         "fingerprint": "1a30ba71cca2921f"},
        {"status": "resolved", "labels": {"alertname": "TrainingLossNaN", "instance": "gpu02:9100"},
         "annotations": {}, "startsAt": "2026-03-01T10:15:00Z", "endsAt": "2026-03-01T10:20:00Z",
         "generatorURL": "", "fingerprint": "bc97ff14869b13e3"}]}


def parse(body: object) -> object:
    return parse_notification(json.dumps(body).encode())


def test_every_alert_of_the_group_is_read_with_its_status() -> None:
    got = parse_notification(json.dumps(BODY).encode())
    assert [(a.status, a.labels["instance"], a.fingerprint) for a in got.alerts] == [
        ("firing", "gpu01:9100", "1a30ba71cca2921f"), ("resolved", "gpu02:9100", "bc97ff14869b13e3")]
    first = got.alerts[0]
    assert first.name == "TrainingLossNaN"
    assert first.key == "1a30ba71cca2921f@2026-03-01T10:15:00.739266876+02:00"
    assert got.group_key == BODY["groupKey"]


def test_without_a_fingerprint_the_labels_name_the_alert() -> None:
    alert = {k: v for k, v in BODY["alerts"][0].items() if k != "fingerprint"}
    once, again = (parse({**BODY, "alerts": [alert]}).alerts[0] for _ in range(2))  # type: ignore[attr-defined]
    other = parse({**BODY, "alerts": [{**alert, "labels": {"alertname": "X"}}]}).alerts[0]  # type: ignore[attr-defined]
    assert once.fingerprint == again.fingerprint != other.fingerprint
    assert len(once.fingerprint) == 16


@pytest.mark.parametrize(("body", "reason"), [
    (b"\xff\xfe", "not UTF-8"),
    (b'{"version": "4", "alerts": [', "not JSON"),
    (b"[" * 100_000 + b"]" * 100_000, "nests too deep"),
    (b"[]", "not a JSON object"),
    (json.dumps({**BODY, "version": "3"}).encode(), "payload version '3', expected '4'"),
    (json.dumps({**BODY, "alerts": {}}).encode(), "no `alerts` list"),
    (json.dumps({**BODY, "alerts": [{}] * (MAX_ALERTS + 1)}).encode(), "at most 1000"),
    (json.dumps({**BODY, "alerts": [{**BODY["alerts"][0], "status": "pending"}]}).encode(),
     "alerts[0].status is 'pending'"),
    (json.dumps({**BODY, "alerts": [{**BODY["alerts"][0], "labels": {"a": ["b"]}}]}).encode(),
     "alerts[0].labels.a"),
    (json.dumps({**BODY, "alerts": [{**BODY["alerts"][0], "labels": {}}]}).encode(), "labels is empty"),
    (json.dumps({**BODY, "alerts": [{**BODY["alerts"][0], "startsAt": "yesterday"}]}).encode(),
     "alerts[0].startsAt is 'yesterday'"),
    (json.dumps({**BODY, "alerts": [{**BODY["alerts"][0], "fingerprint": "../../etc"}]}).encode(),
     "alerts[0].fingerprint"),
])
def test_a_body_we_cannot_act_on_is_refused_in_one_line(body: bytes, reason: str) -> None:
    with pytest.raises(PayloadError) as refused:
        parse_notification(body)
    assert reason in str(refused.value) and "\n" not in str(refused.value)
