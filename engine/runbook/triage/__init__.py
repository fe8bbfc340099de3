"""`runbook triage`: which runbook a log points to, from the signatures runbooks declare:
reading logs as streams, normalising lines, analysing regexes, scoring and ranking matches.
"""
