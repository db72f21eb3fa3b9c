"""The exceptions tlmscore raises: one small hierarchy so callers can catch `TlmscoreError`."""

from __future__ import annotations

__all__ = [
    "ConfigError",
    "FetchError",
    "ScorerError",
    "TlmscoreError",
    "TranscriptError",
]


class TlmscoreError(Exception):
    """Base class of every error tlmscore raises on purpose."""


class ConfigError(TlmscoreError):
    """Settings or command-line options that cannot work together."""


class TranscriptError(TlmscoreError):
    """A record that cannot be read or rendered; names where it came from.

    The batch turns it into an error row and goes on with the next record.
    """

    def __init__(self, message: str, *, source: str | None = None, line: int | None = None) -> None:
        self.source = source
        self.line = line
        where = f"{source}:{line}: " if source is not None and line is not None else ""
        super().__init__(f"{where}{message}")
        self.reason = message


class FetchError(TlmscoreError):
    """A page could not be fetched; carries the page-record status it maps to."""

    def __init__(self, status: str, message: str) -> None:
        self.status = status
        super().__init__(message)


class ScorerError(TlmscoreError):
    """A scorer could not be set up, or failed for one row."""
