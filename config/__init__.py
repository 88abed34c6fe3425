"""Configuration: the settings object and the offline environment."""

from config.settings import Settings, SettingsError, get_settings, load_settings

__all__ = ["Settings", "SettingsError", "get_settings", "load_settings"]
