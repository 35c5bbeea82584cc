"""The raw TCP limit of a path, from the client: workbench's own probe (wire, transfer, client) and iperf3.

wire.py and transfer.py are shared with the far host's halves in workbench.server (probe.py, iperf.py),
which import them; nothing here imports the server.
"""
