"""One module per protocol client, one small interface (base.Client), one registry (registry.py).

Installed as workbench.protocols from the top-level protocols/ folder. Also the client of the far host's
control API (control.py). May import workbench.shared only: never fixtures or probe (the same layer), nor
server, core, lab or cli.
"""
