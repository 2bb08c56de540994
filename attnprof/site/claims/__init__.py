"""Checked sentences (claims), each computed from the records: the machinery in core.py, the claims one
module per topic, all imported here so that every claim and piece registers (registry.load imports this)."""
from . import (backward, compile, conditions, end_to_end, fallback, graphs, kernels, ladder, layer,  # noqa: F401
               methods, published, rankings, same_chip, serving, sweep, two_gpus, verification, versus_a100)
