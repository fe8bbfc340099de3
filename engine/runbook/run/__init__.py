"""Walking a runbook over nodes: node specs, the level-synchronous walk, fixes, watch,
recording and replay of incidents, and redaction of what is kept.
"""
