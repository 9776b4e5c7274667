"""The release of tfmapreduce (read by the build without importing anything)."""

__version__ = "0.2.0.dev0"
