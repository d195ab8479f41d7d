"""amptui: a terminal dashboard for PyTorch automatic mixed precision training.

Importing this package stays cheap (no torch, no textual) so `amptui --help` answers fast.
"""

__version__ = "0.1.0"
