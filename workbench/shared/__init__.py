"""What every part of workbench shares: errors and exit codes, sizes and units, the far host's address
(Target, ports, URLs), credentials, input checks, process inspection, TCP_INFO and where state lives.

Nothing here imports any other part of workbench."""
