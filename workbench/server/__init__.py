"""The far host: `workbench serve` (HTTP with its control API, FTP, the TCP probe, iperf3), the confined
view of the served root, and the supervision of the real daemons (sshd, smbd, rsyncd) in daemons/.

May import workbench.shared, fixtures (to make test files on request) and probe (the probe's wire format);
never core, lab or cli, nor the protocol clients.
"""
