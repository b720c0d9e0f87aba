"""Worker processes that read hostile bytes, and the bound on how many run at once."""
