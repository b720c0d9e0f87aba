"""The model engines: the HTTP client, the model directory and the pass-through relay."""
