from attnprof.analysis import occupancy
from attnprof.analysis import oplist

A100 = {"maxThreadsPerMultiprocessor": 2048, "regsPerMultiprocessor": 65536,
        "sharedMemPerMultiprocessor": 167936, "computeMajor": 8, "computeMinor": 0, "warpSize": 32}


def test_the_posts_a100_footprints():
    flash = occupancy.theoretical(255, 128, 49152, A100)  # post: 2 blocks/SM, 8 of 64 warps
    assert (flash["blocks_per_sm"], flash["warps_per_sm"], flash["limiter"]) == (2, 8, "registers")
    assert flash["occupancy_pct"] == 12.5
    cudnn = occupancy.theoretical(240, 256, 0, A100)  # post: 1 block/SM, 12.5 %
    assert (cudnn["blocks_per_sm"], cudnn["occupancy_pct"]) == (1, 12.5)


def test_each_limit_can_bind():
    assert occupancy.theoretical(32, 1024, 0, A100)["limiter"] == "warps"
    assert occupancy.theoretical(16, 32, 0, A100)["limiter"] == "blocks"
    assert occupancy.theoretical(32, 128, 100_000, A100)["limiter"] == "shared memory"


def test_footprint_rows_use_the_traces_device_properties(h200):
    from attnprof.analysis import trace
    t = h200("flash")
    fwd = trace.forwards(t, "attention_forward")[0]
    summary = {"ops": [op.__dict__ for op in fwd.ops]}
    (row,) = oplist.footprint_rows(summary, t["deviceProperties"][0])
    assert row["registers"] == 255 and row["occupancy_pct"] == 12.5 and row["max_warps"] == 64
