"""Whether a process still runs, for the tests that check that a tool leaves none behind."""


def alive(pid):
    """``pid`` exists and is not a zombie (an ended child its parent has not reaped)."""
    try:
        with open(f"/proc/{pid}/stat") as file:
            return file.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False
