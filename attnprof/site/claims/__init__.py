"""Checked sentences (claims), each computed from the records: the machinery in core.py, the claims one
module per topic, all imported here so that every claim and piece registers (registry.load imports this)."""
from . import (backward, compile, conditions, graphs, kernels, ladder, layer, methods, published, rankings,  # noqa: F401
               same_chip, sweep, two_gpus, versus_a100)
