"""The user-facing error every subcommand raises: ``dashraker`` prints it as one line and exits with status 2."""

import argparse

__all__ = ["CliError", "RenamedOption", "renamed_option", "renamed_choices"]


class CliError(Exception):
    """A user-facing error: printed as one line, exit status 2, no traceback."""


class RenamedOption(CliError):
    """A renamed flag given, raised as the command line is read (before any work); ``prog`` is the command's."""

    def __init__(self, prog, message):
        super().__init__(message)
        self.prog = prog


class _Renamed(argparse.Action):
    def __init__(self, option_strings, dest, now, **kwargs):
        super().__init__(option_strings, dest, nargs="?", help=argparse.SUPPRESS, **kwargs)
        self.now = now

    def __call__(self, parser, namespace, values, option_string=None):
        raise RenamedOption(parser.prog, f"{option_string} is now {self.now}")


def renamed_option(parser, old, now):
    """Keep ``old`` on ``parser`` only to refuse it in one line, saying what it is called ``now``."""
    parser.add_argument(old, action=_Renamed, dest=f"renamed_{old.lstrip('-').replace('-', '_')}", now=now)


class _Choice(argparse.Action):
    def __init__(self, option_strings, dest, allowed, renamed, **kwargs):
        super().__init__(option_strings, dest, metavar="{" + ",".join(allowed) + "}", **kwargs)
        self.allowed, self.renamed = allowed, renamed

    def __call__(self, parser, namespace, values, option_string=None):
        if values in self.renamed:
            raise RenamedOption(parser.prog, f"{option_string} {values} is now spelled {self.renamed[values]}")
        if values not in self.allowed:
            raise argparse.ArgumentError(self, f"invalid choice: {values!r} (choose from {', '.join(self.allowed)})")
        setattr(namespace, self.dest, values)


def renamed_choices(parser, flag, allowed, renamed, **kwargs):
    """A flag taking one of ``allowed``; a spelling in ``renamed`` (old -> new) is refused in one line naming the
    new one."""
    parser.add_argument(flag, action=_Choice, allowed=tuple(allowed), renamed=dict(renamed), **kwargs)
