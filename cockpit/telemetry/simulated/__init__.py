"""The simulated NVML: a scripted stand-in for the pynvml module (tests, demos)."""
