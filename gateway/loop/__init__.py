"""The Web-on answer: rounds against the engine, call vetting, the conversation, citations."""
