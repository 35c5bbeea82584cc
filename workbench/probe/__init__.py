"""The raw TCP limit of a path, measured from the client: workbench's own probe and iperf3."""
