"""web_search: its rules, SearXNG, the answer's reading, the tool text."""
