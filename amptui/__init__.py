"""amptui: a terminal dashboard for PyTorch automatic mixed precision training.

Importing this package stays cheap (no torch, no textual) so `amptui --help` answers fast;
`amptui.Monitor` (which needs torch) loads on first use.
"""

from amptui.version import __version__

__all__ = ["Monitor", "__version__"]


def __getattr__(name: str):
    if name == "Monitor":
        from amptui.monitor import Monitor

        return Monitor
    raise AttributeError(f"module 'amptui' has no attribute {name!r}")
