"""Comparing runs: a run read for comparison (runsummary), the table (compare), its notes and figures."""
