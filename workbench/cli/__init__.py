"""The command line: parses arguments and presents runs (progress, tables, files).

app.py is the typer app and `main` (the `workbench` command); options.py makes `run` and `lab`'s options
from the settings table; progress.py shows a run (status lines, progress bars) and writes its JSON;
report.py renders tables, history and comparisons; doctor.py says what can run here. The top layer: it
may import every other package, and none imports it (only workbench.__main__).
"""
