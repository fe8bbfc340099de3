"""Training entry point and loop (`python -m llm.training.train --help`)."""
