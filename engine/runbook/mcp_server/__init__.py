"""`runbook mcp`: the runbooks as tools and resources for an on-call assistant, over the Model
Context Protocol (the `mcp` SDK, an optional extra: `pip install 'runbook[mcp]'`).

Read-only unless a person starts the server with --allow-read-only-fixes, and then only fixes
whose effect is `read-only`; node lists capped by --max-nodes, calls bounded by --timeout, every
tool call in the audit log, secrets redacted as in reports. The modules:

    server.py     the MCPServer: tools and resources registered, every call audited, errors one line
    tools.py      the tools' names, descriptions, input schemas and annotations
    resources.py  runbooks and knowledge-base articles as resources, in English and 中文
    catalog.py    list_runbooks, show_runbook, search        (library/)
    logs.py       triage_log                                  (triage/)
    diagnose.py   run_runbook and check                       (run/, report/)
    bundle.py     collect                                     (collect/)
    targets.py    the nodes a call names, capped              (run/targets.py)
    safety.py     what a call may do: fixes, nodes, time
    audit.py      tool calls in the audit log                 (run/audit.py)
    progress.py   nodes done and left, as progress notifications
    answer.py     what a tool returns, and the one-line error it raises

Only server.py, tools.py, resources.py and progress.py (lazily) touch the SDK; the others call
the engine as the commands do, so `runbook run` and a tool call give the same answer.
"""
