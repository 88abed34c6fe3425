"""Alembic migrations of the app tables (persistence/database.py); run by `database.upgrade`."""
