"""What every ``seam`` command shares: the pipeline its ``--pipeline`` names, read once.

Delivery guarantee: none (argument handling)."""

from __future__ import annotations

from seam.config import load_pipeline
from seam.core.pipeline import Pipeline


def pipeline_of(args) -> Pipeline:
    """The pipeline of ``--pipeline`` (loaded at the first call, then kept on ``args``)."""
    if getattr(args, "_pipeline_obj", None) is None:
        args._pipeline_obj = load_pipeline(args.pipeline)
    return args._pipeline_obj


def table_args(pipeline: Pipeline, args) -> list[str]:
    """``--table`` arguments for a stream part's own command line: the tables given, by their full names."""
    return [a for t in args.table for a in ("--table", pipeline.table(t).name)]
