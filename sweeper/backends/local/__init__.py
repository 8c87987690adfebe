"""The local pool backend: pinned child processes on GPU or CPU-core slots, warm starts."""
