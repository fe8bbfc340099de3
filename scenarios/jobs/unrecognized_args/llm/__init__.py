"""A small training framework (CPU only, standard library only) for the `unrecognized_args` scenario.

Configuration comes from dataclasses, one per config group; `llm.config.build_parser`
turns every field into a command-line option `--<group>-<field>` (underscores become
hyphens), and boolean fields into a flag pair `--<group>-<field>` / `--no-<group>-<field>`
that takes no value. Entry point: `python -m llm.training.train`.
"""
