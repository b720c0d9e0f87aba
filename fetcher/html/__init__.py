"""The HTML reader: charset, pruning, main content, rendering to text, same-site links."""
