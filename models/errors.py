"""Errors of the model layer.

Kept in their own module so that callers can catch them without importing the runtime (xllamacpp) or a
provider package.
"""

from __future__ import annotations


class ModelUnavailableError(RuntimeError):
    """A configured language model cannot be used; the message says what to install or set to fix it."""
