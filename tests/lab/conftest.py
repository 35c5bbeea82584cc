"""Lab tests: the emulated two-host lab (`workbench lab`, workbench.lab), in network namespaces the tests create.

They need root, network namespaces and TUN; without them they skip (marked `lab`, with the reason from
tests/helpers.lab_unavailable or the lab's own check). They are timing-sensitive: run them on a quiet
machine, one group at a time (`python -m pytest tests/lab`), never beside other heavy work.
"""
