"""The streaming filter for tool calls written as text (SPEC 4a)."""
