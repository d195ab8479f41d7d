"""Device facts for the event stream: the start record's device, memory in step records, periodic
`mem` samples (NVML per GPU when available) and the end record's peak. Host-side counters only:
nothing here waits for the device."""

from __future__ import annotations

import os
import resource
import time
from dataclasses import dataclass, field
from types import ModuleType

import torch

from amptui.core.config.precision import wide_dtype
from amptui.machine.cpu import cpu_name


def device_info(device: torch.device) -> dict:
    """The start record's `device`: type, name, count, index."""
    if device.type == "cuda":
        return {"type": "cuda", "name": torch.cuda.get_device_name(device),
                "count": torch.cuda.device_count(), "index": device.index}
    return {"type": device.type, "name": cpu_name(), "count": os.cpu_count() or 1, "index": None}


def _visible_gpus(nv) -> list[tuple[int, object]]:
    """(torch index, NVML handle) of the GPUs this process can use. NVML counts every GPU in PCI
    order and ignores CUDA_VISIBLE_DEVICES; torch's device UUIDs tie the two together."""
    try:
        pairs = []
        for index in range(torch.cuda.device_count()):
            uuid = str(torch.cuda.get_device_properties(index).uuid)
            pairs.append((index, nv.nvmlDeviceGetHandleByUUID(uuid if uuid.startswith("GPU-") else f"GPU-{uuid}")))
        if pairs:
            return pairs
    except Exception:  # an older driver or torch without UUIDs: every GPU, by NVML's own order
        pass
    return [(index, nv.nvmlDeviceGetHandleByIndex(index)) for index in range(nv.nvmlDeviceGetCount())]


# --- memory ----------------------------------------------------------------------------------------

_PROCESS: list = []  # psutil's handle on this process, made once (making one reads /proc again)


def _rss() -> tuple[int, int]:
    import psutil

    if not _PROCESS or _PROCESS[0].pid != os.getpid():  # a forked child gets its own
        _PROCESS[:] = [psutil.Process(os.getpid())]
    rss = _PROCESS[0].memory_info().rss
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux
    return rss, max(rss, peak)


def step_memory(device: torch.device) -> dict[str, int]:
    """The `mem` field of a step record: the allocator's counters (no sync) or the process RSS."""
    if device.type == "cuda":
        return {"allocated": torch.cuda.memory_allocated(device), "reserved": torch.cuda.memory_reserved(device),
                "peak_allocated": torch.cuda.max_memory_allocated(device)}
    rss, peak = _rss()
    return {"rss": rss, "peak_rss": peak}


def peak_memory(device: torch.device) -> int:
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device)
    return _rss()[1]


@dataclass
class DeviceSampler:
    """Periodic `mem` records: NVML per GPU when available (used, total, util), and process RSS."""

    every_s: float = 2.0
    last: float = field(default=0.0)
    _nvml: ModuleType | None = None  # pynvml, imported on first use
    _nvml_failed: bool = False

    def due(self) -> bool:
        return time.monotonic() - self.last >= self.every_s

    def sample(self, with_gpus: bool) -> dict:
        self.last = time.monotonic()
        rss, peak = _rss()
        payload: dict = {"rss": rss, "peak_rss": peak, "devices": []}
        if with_gpus:
            payload["devices"] = self._gpus()
        return payload

    def _gpus(self) -> list[dict]:
        if self._nvml_failed:
            return []
        try:
            nv = self._nvml
            if nv is None:
                import pynvml

                pynvml.nvmlInit()
                nv = self._nvml = pynvml
            devices = []
            for index, handle in _visible_gpus(nv):
                info = nv.nvmlDeviceGetMemoryInfo(handle)
                util = nv.nvmlDeviceGetUtilizationRates(handle)
                devices.append({"index": index, "name": nv.nvmlDeviceGetName(handle), "used": int(info.used),
                                "total": int(info.total), "util": int(util.gpu)})
            return devices
        except Exception:  # no driver / no NVML library: telemetry is optional
            self._nvml_failed = True
            return []


def native_bf16(device: torch.device) -> bool:
    """bfloat16 fast here, as `amptui doctor` judges it: a GPU's without emulation (emulated bf16 on
    a T4/V100 is slow); a CPU's by machine.dtype_speed's verdict (the measured rates doctor and the
    launcher cached, else the CPU's flags), so no advice says "try bfloat16" where it measured slow."""
    if device.type == "cuda":
        return bool(torch.cuda.is_bf16_supported(including_emulation=False))
    if device.type == "cpu":
        from amptui.machine.dtype_speed import slow_dtypes

        wide = wide_dtype()
        return wide not in slow_dtypes("cpu", dtypes=(wide,))
    return True
