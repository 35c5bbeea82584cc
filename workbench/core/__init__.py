"""A run: the plan, the raw TCP baseline, the timed and verified copies, their explanation and storage."""
