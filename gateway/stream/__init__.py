"""The one stream of typed events from a source to the client: events, pump, writer."""
