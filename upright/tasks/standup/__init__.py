"""upright.tasks.standup."""
