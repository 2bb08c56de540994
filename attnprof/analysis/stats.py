"""Statistics of repeated timings, the same wherever a record is made or checked (no torch)."""
from __future__ import annotations

import statistics


def samples_disagreements(record: dict, samples="event_times_us") -> list[str]:
    """Where a record's event statistics are not those of the raw samples it keeps."""
    if samples not in record:
        return [f"no raw samples ({samples}) to recompute its event statistics from"]
    return [f"{k} {record.get(k)!r} (its samples: {v!r})" for k, v in event_stats(record[samples]).items()
            if record.get(k) != v]


def quantile(samples, q: float) -> float:
    """The sample at rank q of the sorted samples (nearest rank, no interpolation)."""
    xs = sorted(samples)
    return xs[min(len(xs) - 1, max(0, round(q * (len(xs) - 1))))]


def event_stats(times: list[float]) -> dict:
    """Median, 10th and 90th percentile (nearest rank) of CUDA-event times, in µs."""
    return {"event_median_us": statistics.median(times), "event_p10_us": quantile(times, 0.1),
            "event_p90_us": quantile(times, 0.9)}
