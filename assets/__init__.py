"""upright.assets."""
