"""Theoretical occupancy of a kernel launch from its footprint and the GPU's per-SM limits.

The per-SM limits come from the trace's own `deviceProperties` (registers, shared memory, threads per
SM); the few limits that the trace does not record are the CUDA Programming Guide's values per compute
capability. This is *theoretical* occupancy: the most warps the limits allow to be resident at once,
not a measurement (the trace's "est. achieved occupancy %" is shown beside it, labelled as such).
"""
from __future__ import annotations

import math

from ..model import gpus

# Not in deviceProperties: max resident blocks per SM (the GPU table's, per compute capability), register
# allocation unit (registers per warp are rounded up to it) and the shared memory the system reserves per
# block (CUDA C++ Programming Guide, "Compute Capabilities" table, for 8.x and 9.0).
REG_ALLOC_UNIT = 256
SMEM_RESERVED_PER_BLOCK = 1024


def theoretical(registers: int, threads: int, shared_memory: int, props: dict) -> dict:
    """Blocks and warps per SM that fit, which limit binds, and the occupancy in % of max warps."""
    warp = props.get("warpSize", 32)
    max_warps = props["maxThreadsPerMultiprocessor"] // warp
    warps_per_block = math.ceil(threads / warp)
    regs_per_warp = math.ceil(registers * warp / REG_ALLOC_UNIT) * REG_ALLOC_UNIT
    cc = gpus.CAPABILITIES.get((props.get("computeMajor"), props.get("computeMinor")))
    limits = {
        "warps": max_warps // warps_per_block,
        "blocks": cc.blocks_per_sm if cc else 10**6,  # a capability the table lacks: no limit known
        "registers": (props["regsPerMultiprocessor"] // regs_per_warp) // warps_per_block if registers else 10**6,
        "shared memory": (props["sharedMemPerMultiprocessor"] // (shared_memory + SMEM_RESERVED_PER_BLOCK)
                          if shared_memory else 10**6),
    }
    blocks = min(limits.values())
    limiter = min(limits, key=limits.get)
    return {"blocks_per_sm": blocks, "warps_per_sm": blocks * warps_per_block, "max_warps": max_warps,
            "occupancy_pct": 100.0 * blocks * warps_per_block / max_warps, "limiter": limiter, "limits": limits}
