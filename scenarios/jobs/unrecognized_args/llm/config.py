"""Config groups and the command line built from them.

Every field of a config group becomes `--<group>-<field>` (underscores become hyphens),
e.g. `ModelConfig.hidden_size` -> `--model-hidden-size`. Boolean fields take no value:
`--model-use-moe` sets True, `--no-model-use-moe` sets False (so `--model-use-moe true`
leaves `true` over, and argparse rejects it as an unrecognized argument).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field, fields
from typing import Any


@dataclass
class ModelConfig:
    vocab_size: int = 32
    hidden_size: int = 32
    num_layers: int = 1
    dropout: float = 0.0
    use_moe: bool = False
    num_experts: int = 4
    top_k: int = 2


@dataclass
class TrainingConfig:
    epochs: int = 3
    batch_size: int = 64
    steps_per_epoch: int = 200
    log_interval: int = 20
    gradient_clip_val: float = 1.0
    seed: int = 1234


@dataclass
class OptimizationConfig:
    lr: float = 0.5
    weight_decay: float = 0.0
    warmup_steps: int = 50
    use_amp: bool = True
    use_compile: bool = True
    num_workers: int = 0
    pin_memory: bool = True


@dataclass
class CheckpointConfig:
    save_dir: str = "checkpoints"
    save_interval: int = 0
    resume_from_checkpoint: str = ""


@dataclass
class DistributedConfig:
    backend: str = "gloo"
    gpus_per_node: int = 0


@dataclass
class Config:
    model: ModelConfig = field(default_factory=ModelConfig)
    training: TrainingConfig = field(default_factory=TrainingConfig)
    optimization: OptimizationConfig = field(default_factory=OptimizationConfig)
    checkpoint: CheckpointConfig = field(default_factory=CheckpointConfig)
    distributed: DistributedConfig = field(default_factory=DistributedConfig)


def _dest(group: str, name: str) -> str:
    return f"{group}__{name}"


def build_parser(prog: str | None = None) -> argparse.ArgumentParser:
    """One option per config field, grouped like the config; booleans as flag pairs."""
    parser = argparse.ArgumentParser(
        prog=prog,
        description="Train a language model. Options are --<config group>-<parameter>; boolean "
                    "options take no value: --<group>-<name> enables, --no-<group>-<name> disables.")
    defaults = Config()
    for group_field in fields(Config):
        group = group_field.name
        section = getattr(defaults, group)
        arg_group = parser.add_argument_group(f"{group} ({type(section).__name__})")
        for item in fields(section):
            default = getattr(section, item.name)
            flag = f"--{group}-{item.name.replace('_', '-')}"
            dest = _dest(group, item.name)
            if isinstance(default, bool):
                arg_group.add_argument(flag, dest=dest, action="store_true",
                                       help=f"enable {group}.{item.name} (default: {default})")
                arg_group.add_argument(f"--no-{flag[2:]}", dest=dest, action="store_false",
                                       help=f"disable {group}.{item.name}")
                parser.set_defaults(**{dest: default})
            else:
                arg_group.add_argument(flag, dest=dest, type=type(default), default=default,
                                       metavar=type(default).__name__.upper(),
                                       help=f"{group}.{item.name} (default: {default!r})")
    return parser


def parse_config(argv: list[str] | None = None, prog: str | None = None) -> Config:
    """Parse the command line into a Config (argparse exits 2 on anything it does not know)."""
    args = build_parser(prog).parse_args(argv)
    values: dict[str, dict[str, Any]] = {}
    for key, value in vars(args).items():
        group, name = key.split("__", 1)
        values.setdefault(group, {})[name] = value
    config = Config()
    for group, items in values.items():
        section = getattr(config, group)
        for name, value in items.items():
            setattr(section, name, value)
    return config
