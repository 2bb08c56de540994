from pathlib import Path

import pytest

from attnprof import trace

FIXTURES = Path(__file__).parent / "fixtures"
LABEL = "attention_forward"


@pytest.fixture(scope="session")
def h200():
    """Load a committed H200 trace fixture by stage name."""
    cache = {}

    def load(stage):
        if stage not in cache:
            cache[stage] = trace.load(FIXTURES / f"h200-{stage}.trace.json.gz")
        return cache[stage]
    return load
