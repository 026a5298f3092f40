"""upright.robots."""
