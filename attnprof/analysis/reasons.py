"""PyTorch's warnings as reasons: the log prefix and the 'Triggered internally' suffix removed."""
import re

WARNING_PREFIX = re.compile(r"^\[?W\d{4} [\d:.]+ (?:\d+ )?[^\]\s]*\]\s*(?:Warning:\s*)?")
TRIGGERED = re.compile(r"\s*\(Triggered internally at [^)]*\)\.?")


FIRST_SENTENCE = re.compile(r"(?<=\.) Got |(?<=[a-z0-9)]\.) (?=[A-Z])| \(function ")  # where a reason's first sentence ends


def first_sentence(reason: str) -> str:
    """A reason up to the end of its first sentence: before the values it got and the function that checked."""
    return FIRST_SENTENCE.split(reason)[0]


def clean(line: str) -> str:
    """A warning line as PyTorch's reason alone."""
    return TRIGGERED.sub("", WARNING_PREFIX.sub("", line)).strip()
