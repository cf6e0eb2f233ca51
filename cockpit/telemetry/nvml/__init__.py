"""GPU telemetry through NVML (the pynvml module of nvidia-ml-py)."""
