"""Alembic revisions of the app tables, oldest first."""
