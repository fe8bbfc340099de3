"""The `ray` check (ray_state.py): the Ray cluster a node belongs to, read by the node's own
Python in a child process, never by importing ray into the probe."""
