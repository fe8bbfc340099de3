"""One notification taken in: every firing alert of `alerts[]` mapped to its run and queued;
resolved ones, ones already taken and ones that map to nothing only counted (and the last
logged). It runs while Alertmanager waits for the answer, so it does no more than that."""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, field

from runbook.alerts.payload import Notification
from runbook.alerts.queue import AlertQueue, Job
from runbook.alerts.routing import Router, Unmapped


@dataclass
class Intake:
    """What became of a notification's alerts (the receiver's answer to Alertmanager)."""

    queued: list[str] = field(default_factory=list)  # job ids
    duplicate: int = 0
    resolved: int = 0
    unmapped: int = 0

    def to_json(self) -> dict[str, object]:
        return {"queued": len(self.queued), "jobs": self.queued, "duplicate": self.duplicate,
                "resolved": self.resolved, "unmapped": self.unmapped}


def take(notification: Notification, router: Router, queue: AlertQueue,
         submit: Callable[[Job], None]) -> Intake:
    """Queue the firing alerts' runs and hand each job to `submit`. Raises QueueFull (the alerts
    queued before it stay queued; Alertmanager's retry finds them taken)."""
    intake = Intake()
    if notification.truncated:
        print(f"runbook alerts: Alertmanager left {notification.truncated} alert(s) out of a notification "
              "(max_alerts in webhook_config): they start no run", file=sys.stderr)
    for alert in notification.alerts:
        if alert.status != "firing":  # a resolved alert never starts a run
            intake.resolved += 1
            continue
        routed = router.route(alert)
        if isinstance(routed, Unmapped):
            intake.unmapped += 1
            print(f"runbook alerts: {alert.name or 'an alert'} ({alert.fingerprint}) starts no run: "
                  f"{routed.reason}", file=sys.stderr)
            continue
        job = queue.offer(alert, routed)
        if job is None:
            intake.duplicate += 1
            continue
        intake.queued.append(job.id)
        submit(job)
    return intake
