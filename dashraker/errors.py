"""The user-facing error every subcommand raises: ``dashraker`` prints it as one line and exits with status 2."""

__all__ = ["CliError"]


class CliError(Exception):
    """A user-facing error: printed as one line, exit status 2, no traceback."""
