"""upright.tasks."""
