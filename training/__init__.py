"""upright.training."""
