"""runbook: declarative runbooks for distributed-training failures.

Kept import-light on purpose: the probe ships this package's `checks` and
`probe` sub-packages to nodes, and `runbook --help` must start fast.
"""

__version__ = "0.1.0"
