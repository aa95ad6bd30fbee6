"""The archive of finished AgenticTasks: written when the platform's watch sees a task
reach a terminal phase, read when the resource is gone."""
