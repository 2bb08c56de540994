# --8<-- [start:attention]
import torch


def graphed(forward, warmup=3):
    """Record one forward into a CUDA graph and return a function that replays it.

    A replay is one launch from the CPU for all of the forward's kernels. The graph keeps the
    addresses it was recorded with: the inputs it read and the output it returns are the same
    tensors every time (copy new inputs into them before a replay)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm up off the default stream, as graph capture requires
        for _ in range(warmup):
            forward()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = forward()

    def replay():
        graph.replay()
        return out
    return replay
# --8<-- [end:attention]
