"""`amptui slurm PRESET`: an sbatch script that runs the preset under torchrun on N nodes."""

from __future__ import annotations


def add_parser(sub, runs_dir_option) -> None:
    pass


def cmd_slurm(args) -> int:
    return 0
