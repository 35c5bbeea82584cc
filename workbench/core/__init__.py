"""A run: the plan, the raw TCP baseline, the timed and verified copies, their explanation and storage.

May import workbench.shared, fixtures, protocols and probe; never server (the far host is reached over
the network), lab or cli. The runner hands results to its caller, which presents them.
"""
