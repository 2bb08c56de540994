"""Values as a reader sees them: durations, shapes, sizes, names cut to fit, an error's first line."""
from __future__ import annotations


def us(x: float | None) -> str:
    """A duration in microseconds, with a unit a reader can compare across rows."""
    if x is None:
        return "—"
    return f"{x / 1000:.3f} ms" if x >= 1000 else f"{x:.1f} µs"


def shape(dims, sep: str = "×") -> str:
    """(8, 16, 1024, 64) as 8×16×1024×64."""
    return sep.join(map(str, dims))


def size(nbytes: float | None) -> str:
    """Bytes in MiB, or GiB from one GiB up."""
    if nbytes is None:
        return "—"
    return f"{nbytes / 2**30:.2f} GiB" if nbytes >= 2**30 else f"{nbytes / 2**20:.0f} MiB"


def short(name: str, limit: int = 60) -> str:
    return name if len(name) <= limit else name[: limit - 1] + "…"


def first_line(error: BaseException | str) -> str:
    """The first line of an error's message ("" when it has none)."""
    message = str(error).strip()
    return message.splitlines()[0] if message else ""
