"""`runbook test`: canned check results and recorded incidents replayed through a runbook's
tree, no cluster needed, and the steps, branches and conclusions they reach (`--coverage`).
"""
