"""The network side: address parsing and policy, the one lookup, the pinned connection, a download."""
