"""The Alertmanager receiver behind `runbook alerts serve`: an alert that fires starts a read-only
diagnosis of the nodes it names, and the answer is kept, shown and sent on.

The stages, one module each, in the order an alert goes through them:

    payload.py   the webhook body (version "4") parsed and checked: a one-line reason per refusal
    auth.py      the bearer token or basic-auth credentials Alertmanager's http_config sends
    hosts.py     the node an alert is about (node, hostname, nodename, instance labels), mapped
                 to the names of the inventory and of ~/.ssh/config
    routing.py   which runbook, with which parameters and fixes (runbook_url, a `runbook`
                 annotation or label, the routing file)
    queue.py     the jobs on disk in the state directory (atomic writes), deduplicated by
                 fingerprint and startsAt; a job leaves it only when its run has finished
    intake.py    one notification: every firing alert mapped and queued, the rest counted
    workers.py   a fixed number of threads running the queued jobs
    runner.py    one job: silence, diagnose (the `runbook run` function the CLI room hands in),
                 reports, history, audit log, notify
    history.py   the reports (JSON and HTML, the report package's renderers) and the list of runs
    silence.py   an Alertmanager silence for the alert while its diagnosis runs
    notify.py    the answer posted to a chat (Slack-compatible) or any JSON webhook
    page.py      the page of recent alerts and their conclusions
    server.py    the HTTP server: limits, authentication, the routes
    receiver.py  all of it put together, started and stopped

It sits above `report/` and below `cli/`: the diagnosis itself is `runbook run`'s own function,
which `cli/alerts/` passes in, so nothing here imports the CLI.
"""
