"""The OpenAI chat shapes at both ends: the request, messages, engine chunks and SSE."""
