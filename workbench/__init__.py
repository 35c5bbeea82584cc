"""workbench: do real file copies reach iperf speeds, and if not, why?

Subpackages, lowest layer first; a module imports only from its own package or from lower layers
(tests/unit/test_layers.py): shared < fixtures, protocols, probe < server, core < lab < cli.
protocols and fixtures live in the top-level protocols/ and fixtures/ folders of the source tree.
This module holds only the version and imports nothing, so every layer may read it.
"""

__version__ = "0.1.0"
