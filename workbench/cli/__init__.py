"""The command line: parses arguments and presents runs (progress, tables, files).

app.py is the typer app and `main` (the `workbench` command); options.py makes `run` and `lab`'s options
from the settings table; a run starts in workbench.core.session, and screen.py shows and records its runs
(progress.py: status lines, progress bars; exports.py: the files asked for);
report.py renders tables, history and comparisons; doctor.py says what can run here. The top layer: it
may import every other package, and none imports it (only workbench.__main__).
"""
