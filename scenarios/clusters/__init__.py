"""The test clusters: real daemons on this machine that diagnoses run against.

* ssh.py: a fake multi-host cluster, one OpenSSH server per host in its own namespaces;
* slurm.py: a real Slurm (munged, slurmctld, N slurmd, each slurmd in its own namespaces);
* ray.py: a real multi-node Ray cluster (a head and N-1 workers);
* alertmanager.py: Prometheus' Alertmanager on loopback, posting to one webhook receiver.

They share one lifecycle: daemon.py (one daemon: start, wait until ready, record, stop with
everything it started) and group.py (a cluster of them: retried start, state file, stop,
`down`, the `up` command). procs.py reads /proc; net.py has the names, addresses and ports.
Standard library only at import time.
"""
