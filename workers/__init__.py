"""workers layer."""
