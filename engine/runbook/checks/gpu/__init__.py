"""The `gpu` check and its parts: state and health per device read through NVML (gpu_nvml.py)
or nvidia-smi (gpu_smi.py), the health logic both share (gpu_health.py), and the driver's Xid
events from the kernel log (gpu_xid.py)."""
