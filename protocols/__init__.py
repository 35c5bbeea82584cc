"""One module per protocol client, one small interface (base.Client), one registry (registry.py)."""
