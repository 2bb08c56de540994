"""The GPU's state as NVML reports it (SM and memory clocks, the SM clock's maximum, temperature, power, the
reasons its clocks are held down), read around each round of bench.interleaved and each repeat's measuring.
`read()` opens NVML and torch's device (by PCI bus id) once; None where NVML cannot say (no GPU, no `pynvml`,
a refusing driver), and a query refused alone is None in the result.
"""
from __future__ import annotations

_HANDLE: list = []  # [(pynvml, handle)] once opened; [None] where NVML cannot be used here


def _handle():
    if not _HANDLE:
        try:
            import pynvml
            import torch
            if not torch.cuda.is_available():
                raise RuntimeError("no CUDA GPU")
            pynvml.nvmlInit()
            p = torch.cuda.get_device_properties(torch.cuda.current_device())
            _HANDLE.append((pynvml, pynvml.nvmlDeviceGetHandleByPciBusId(
                f"{p.pci_domain_id:08x}:{p.pci_bus_id:02x}:{p.pci_device_id:02x}.0")))
        except Exception:
            _HANDLE.append(None)
    return _HANDLE[0]


def _reasons(pynvml, gpu):
    return (getattr(pynvml, "nvmlDeviceGetCurrentClocksEventReasons", None)
            or pynvml.nvmlDeviceGetCurrentClocksThrottleReasons)(gpu)


def read() -> dict | None:
    """{"sm_mhz", "max_sm_mhz", "memory_mhz", "temperature_c", "power_w", "throttle_reasons"} now; None
    without NVML."""
    opened = _handle()
    if opened is None:
        return None
    pynvml, gpu = opened
    reads = {"sm_mhz": lambda: pynvml.nvmlDeviceGetClockInfo(gpu, pynvml.NVML_CLOCK_SM),
             "max_sm_mhz": lambda: pynvml.nvmlDeviceGetMaxClockInfo(gpu, pynvml.NVML_CLOCK_SM),
             "memory_mhz": lambda: pynvml.nvmlDeviceGetClockInfo(gpu, pynvml.NVML_CLOCK_MEM),
             "temperature_c": lambda: pynvml.nvmlDeviceGetTemperature(gpu, pynvml.NVML_TEMPERATURE_GPU),
             "power_w": lambda: pynvml.nvmlDeviceGetPowerUsage(gpu) / 1000,
             "throttle_reasons": lambda: _reasons(pynvml, gpu)}
    state = {}
    for name, query in reads.items():
        try:
            state[name] = query()
        except Exception:  # a query this GPU or its driver refuses
            state[name] = None
    return state
