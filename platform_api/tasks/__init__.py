"""AgenticTasks through the platform API: create, list, read, and decide their steps."""
