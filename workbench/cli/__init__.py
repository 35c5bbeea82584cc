"""The command line: parses arguments and presents runs (progress, tables, files).

app.py is the typer app and `main` (the `workbench` command); report.py renders tables, history and
comparisons; doctor.py says what can run here. The top layer: it may import every other package, and none
imports it (only workbench.__main__).
"""
