"""Two languages kept in step: translation fingerprints and their warnings, `runbook i18n
stamp`, and the display width of mixed English/Chinese text in a terminal.
"""
