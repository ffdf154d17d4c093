"""The package version, in one place (imported by the package root, the CLI and the checkpoint writer)."""

__all__ = ["__version__"]

__version__ = "0.5.0"
