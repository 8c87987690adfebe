"""The project's own helpers."""
