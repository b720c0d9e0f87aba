"""The network side: address parsing and policy, one lookup, the pinned connection, a download."""
