"""The one exception type of the LMAD package."""


class LMADError(ValueError):
    """An invalid LMAD, an operation outside its domain, or malformed LMAD notation.

    `position` is the 0-based character position in the parsed text when the error
    comes from `LMAD.parse`, and None otherwise.
    """

    def __init__(self, message: str, position: int | None = None):
        super().__init__(message)
        self.position = position
