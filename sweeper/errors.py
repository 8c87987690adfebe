"""The one error type for bad input: the CLI prints its message on one line and exits with status 2."""


class UsageError(ValueError):
    """Bad input: the message names the key or value and says what is accepted."""

    exit_code = 2
