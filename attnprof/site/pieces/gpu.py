"""The GPU a page speaks of: the one its records were taken on (every record's `device`), named as the GPU
table names it (model/gpus.py). No page, header or claim types a GPU's name; they ask here."""
from __future__ import annotations

from ...analysis import hardware
from ...model import gpus
from ...text import escape
from ..build import Build, RecordUnusable
from ..registry import one_of, piece

SET = "run-hardware"  # the record whose GPU a page names unless told another: its device query gives the peaks


def _record(build: Build, record: str) -> dict:
    """A capture's summary, or a run's record (run-NAME): each states the GPU that took it."""
    return build.run_record(record.removeprefix("run-")) if record.startswith("run-") else build.summary(record)


def device(build: Build, record: str = SET) -> str:
    """The name the driver reported for the GPU that took `record`."""
    return _record(build, record)["device"]


def name(build: Build, record: str = SET) -> str:
    """The GPU that took `record`, as a sentence names it ("H200", "H100 SXM"), escaped for a page."""
    return escape(gpus.display(device(build, record)))


def capability(build: Build, record: str = SET) -> tuple[int, int]:
    return gpus.capability(_record(build, record)["capability"])


def arch(build: Build, record: str = SET) -> str:
    """The architecture of the GPU that took `record` ("Hopper")."""
    return arch_of(_record(build, record)["capability"])


def arch_of(sm: str) -> str:
    """An architecture by its capability as records and kernel names write it: "sm_90" -> "Hopper"; the
    capability itself where the table lacks it."""
    cc = gpus.CAPABILITIES.get(gpus.capability(sm))
    return cc.arch if cc else sm


def peaks(hw: dict) -> dict:
    """The records' GPU's peaks from the hardware run's device query (hardware.queried_peaks); where the GPU table
    lacks its compute capability, what needs them is left out with the one line that says which row to add."""
    p = hardware.queried_peaks(hw)
    if p is None:
        raise RecordUnusable(gpus.missing(hw["query"]["name"]))
    return p


WHAT = {
    "name": name,  # "H200"
    "arch": arch,  # "Hopper"
    "sm": lambda b, r: gpus.sm(capability(b, r)),  # "sm_90", as kernel names write it
    "capability": lambda b, r: "{}.{}".format(*capability(b, r)),  # "9.0"
}


@piece("gpu", inline=True)
def gpu(build: Build, what: str = "name", record: str = SET):
    """The GPU of the records in a sentence: `gpu` (its name), `gpu arch`, `gpu sm`, `gpu capability`;
    a record after it names that record's GPU (`gpu name cp-allgather-w2-1x16x131072x128`)."""
    return one_of(WHAT, what, "gpu")(build, record)
