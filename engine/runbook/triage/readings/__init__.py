"""What a log shows besides its signatures' lines, each read as evidence with the conclusion it
points to: the numbers as series (`series.py`), pasted stack dumps (`stacks.py`), what differs
across hosts and ranks (`spread.py`), and a paste that just stops (`logends.py`). The site's
triage page applies the same rules (site/triage_export.py).
"""
