"""Statistics of repeated timings, the same wherever a record is made or checked (no torch)."""
from __future__ import annotations

import copy
import statistics

from ..model.procedure import RAW_SAMPLES


def quantile(samples, q: float) -> float:
    """The sample at rank q of the sorted samples (nearest rank, no interpolation)."""
    xs = sorted(samples)
    return xs[min(len(xs) - 1, max(0, round(q * (len(xs) - 1))))]


def event_stats(times: list[float]) -> dict:
    """Median, 10th and 90th percentile (nearest rank) of CUDA-event times, in µs."""
    return {"event_median_us": statistics.median(times), "event_p10_us": quantile(times, 0.1),
            "event_p90_us": quantile(times, 0.9)}


def _numbers(value) -> bool:
    return isinstance(value, list) and all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in value)


def pooled(results: list):
    """One result from a run's independent repeats (results of the same shape): every list of raw samples
    (procedure.RAW_SAMPLES, `*_each`, and the lists inside a `timing` or `profiled` part) holds the samples of
    all the repeats, in order; everything else is the first repeat's. Its medians, taken again from the
    pooled samples (analysis/derived.py), are the medians over every process's calls."""
    def merge(nodes: list, inside: bool = False):
        first = nodes[0]
        if isinstance(first, dict) and all(isinstance(n, dict) for n in nodes):
            out = {}
            for key, value in first.items():
                parts = [n.get(key) for n in nodes]
                samples = inside or key in RAW_SAMPLES or key.endswith("_each")
                if samples and all(_numbers(p) for p in parts):
                    out[key] = [x for p in parts for x in p]
                elif isinstance(value, (dict, list)) and all(type(p) is type(value) for p in parts):
                    out[key] = merge(parts, inside or key in RAW_SAMPLES)
                else:
                    out[key] = copy.deepcopy(value)
            return out
        if (isinstance(first, list) and first and all(isinstance(x, dict) for x in first)
                and all(isinstance(n, list) and len(n) == len(first) for n in nodes)):
            return [merge([n[i] for n in nodes], inside) for i in range(len(first))]
        return copy.deepcopy(first)
    return merge(list(results))
