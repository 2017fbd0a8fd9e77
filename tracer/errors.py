"""The one exception bad input may raise, and the warning for degenerate but valid cases."""


class ScenarioError(ValueError):
    """Bad input: the message names the file (when there is one), the field and what was expected."""

    def __init__(self, field: str, expected: str, source: str | None = None):
        self.field, self.expected, self.source = field, expected, source
        where = f"{source}: " if source else ""
        super().__init__(f"{where}{field}: {expected}")

    def at(self, source: str) -> "ScenarioError":
        """The same error, now naming the file it came from."""
        return self if self.source else ScenarioError(self.field, self.expected, source)


class AttentionWarning(UserWarning):
    """Valid input with a surprising result, e.g. a query whose keys are all masked."""
