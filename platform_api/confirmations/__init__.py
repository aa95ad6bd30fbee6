"""The initiating client's confirmation of the high-stakes steps of a task it started."""
