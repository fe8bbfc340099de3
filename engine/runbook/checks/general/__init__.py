"""General-purpose checks whose subject the runbook names: a shell command (`command`), a
process's environment variables (`env`), and a Python snippet run in the node's interpreter
(`python`, in python_snippet.py)."""
