"""PyTorch's warnings as reasons: the log prefix and the 'Triggered internally' suffix removed."""
import re

WARNING_PREFIX = re.compile(r"^\[?W\d{4} [\d:.]+ (?:\d+ )?[^\]\s]*\]\s*(?:Warning:\s*)?")
TRIGGERED = re.compile(r"\s*\(Triggered internally at [^)]*\)\.?")


def clean(line: str) -> str:
    """A warning line as PyTorch's reason alone."""
    return TRIGGERED.sub("", WARNING_PREFIX.sub("", line)).strip()
