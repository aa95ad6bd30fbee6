"""The one floor every move of a step goes through (approve, reject, edit, provide, select,
auto-approve, resolve, retry, reopen, a client's confirmation, cancel).

- `write`: the one optimistic-concurrency write of the platform's part of a task's status:
  the move is computed from the task as read, applied under its resourceVersion, and
  computed again from a fresh read when another writer changed the task meanwhile.
- `refusals`: the one mapping of a `taskflow` refusal to the platform's error family.
- `audit`: the one shape of a move's audit record (the step, the move's facts, the uid).
- `http`: the route vocabulary the slices that expose moves share (path parameters, the
  documented error codes).

The slices that make moves (`tasks`, `human_tasks`, `confirmations`) sit above it: each use
case is its scope, its move, this write, its ledger, this audit and its read model.
"""
