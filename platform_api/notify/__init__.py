"""Notifications: what happened to an org's work, told to its experts
without polling.

- `emitter`: `emit`, the one way to notify (log the event once per id, queue its webhook
  delivery, wake this replica's streams and deliverer at commit).
- `events`: the event names and the pure derivation of events from an AgenticTask.
- `repository`: the event log (`notify_events`), the org's webhook, its deliveries.
- `service`: set, read and remove an org's webhook (URL checked like an upstream's).
- `delivery`: signs and POSTs due deliveries, with retries and exponential backoff.
- `watch`: turns what the platform's task watch sees into events (and tells a task's
  conversation when it ends); the near-deadline check.
- `router`: `/orgs/{id}/webhooks` and the live stream `GET /human-tasks/events`.

Every event enters through `emitter.emit`: the task watch, replies and the dispatcher alike.
One slice under one name, with no floor of its own below it: the slices that notify
(`replies`, `dispatch`) import `notify.emitter`, and `notify` imports neither of them.
"""
