"""Supervision of the real servers workbench tests against: private config and state, no system files."""
