"""Deployment: the installer, its DNS drop-in writer, the units (never installed itself)."""
