"""workbench: do real file copies reach iperf speeds, and if not, why?"""

__version__ = "0.1.0"
