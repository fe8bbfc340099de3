"""What a runbook file is: the model, the loader (the only reader of runbook files) and its
JSON Schema, `when:` expressions, YAML positions, problems, the taxonomy and the engine
versions a runbook may require. Depends on nothing of ours but the check registry.
"""
