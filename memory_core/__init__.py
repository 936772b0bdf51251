"""mnemo's core: everything the chat process needs, and everything the workers run."""
