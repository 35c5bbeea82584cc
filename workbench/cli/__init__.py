"""The command line: parses arguments and presents runs (progress, tables, files)."""
