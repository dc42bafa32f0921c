"""The error for an optional dependency that is not installed (pyproject.toml's extras)."""


class MissingExtra(ImportError):
    """`what` needs a package of the extra `extra`; the message says how to install it. An ImportError, as a missing
    optional dependency is in Python; console scripts print it as one line (training/console.py)."""

    def __init__(self, what: str, extra: str):
        super().__init__(f"{what}: pip install 'vanilla-transformer[{extra}]'.")
