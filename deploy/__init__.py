"""upright.deploy."""
