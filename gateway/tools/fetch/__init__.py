"""fetch_page_content_recursive: rule 1's hosts, the plan, the read, the tool text."""
