"""How runbooks change over time: semver rules and `lint --base REV` (a file against its git
revision), and the chain of format migrations behind `runbook migrate`.
"""
