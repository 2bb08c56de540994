"""Independent repeats run in processes of their own (attnprof/measure/repeat.py)."""
import os

from attnprof.measure import repeat


def test_each_repeat_is_a_fresh_process_and_a_failing_one_says_why():
    results = repeat.in_processes("repeat.env", 2)
    assert len(results) == 2 and all(r["FLASH_ATTENTION_CUTE_DSL_CACHE_ENABLED"] == "1" for r in results)
    assert "FLASH_ATTENTION_CUTE_DSL_CACHE_ENABLED" not in os.environ  # set for the repeats' processes only
    (failed,) = repeat.in_processes("repeat.no_such_function", 1)
    assert set(failed) == {"error"} and "no_such_function" in failed["error"]
