"""Checks of the node itself, read from /proc, /sys and the kernel: its faults (`host`), its
resources at a glance (`system`), the training processes (`process`), its network links and the
rendezvous master (`network`), and a TCP port (`port`)."""
