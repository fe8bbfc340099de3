"""`runbook collect`: the diagnosis bundle, gathered by existing checks on every node
(its sections and the scripts they run), redacted, indexed and archived reproducibly.
"""
