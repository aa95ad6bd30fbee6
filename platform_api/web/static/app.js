// The expert workspace: fills the server-rendered pages from the platform's JSON API.
//
// The bearer token from POST /auth/token is kept in sessionStorage (per tab, gone with
// it) and sent as `Authorization: Bearer`; no cookie carries credentials, so requests
// cannot be forged from another site. Every value from the API is put into the page as
// text (never as HTML). Every decision carries an Idempotency-Key, made once per user
// action, so that a retry after a network failure cannot decide twice. What the client
// portal shares with it (helpers, session, API call, sign-in, event stream) is common.js.
"use strict";

(() => {
  const {
    $, el, sleep, newKey, timeFormat, fieldError, askText, pill, announce,
    showMessage, token, forget, toLogin, ApiError, call, liveUpdates, start,
  } = humanworkPage({
    prefix: "/workspace", home: "/workspace/tasks", keyPrefix: "web-", signIn: "log in",
    markFields: true,
  });
  const TOASTED = "humanwork.toasted";
  const DEFAULT_POLL_MS = 3000;

  // --- small helpers -------------------------------------------------------------------

  function pollInterval() {
    const asked = Number(new URLSearchParams(location.search).get("poll"));
    if (Number.isFinite(asked) && asked > 0) return Math.min(60, Math.max(0.5, asked)) * 1000;
    return DEFAULT_POLL_MS;
  }

  function json(value) {
    return JSON.stringify(value, null, 2);
  }

  function plural(n, one, many) {
    return `${n} ${n === 1 ? one : many || one + "s"}`;
  }

  function absolute(iso) {
    return iso ? timeFormat.format(new Date(iso)) : "";
  }

  function duration(span) {
    if (span < 60) return plural(span, "second");
    if (span < 3600) return plural(Math.round(span / 60), "minute");
    if (span < 86400) return plural(Math.round(span / 3600), "hour");
    return plural(Math.round(span / 86400), "day");
  }

  function relative(iso, now) {
    const seconds = Math.round((Date.parse(iso) - now) / 1000);
    const text = duration(Math.abs(seconds));
    return seconds >= 0 ? `in ${text}` : `overdue by ${text}`;
  }

  function risk(level) {
    return el("span", { class: `risk risk-${level}`, text: level, title: `risk: ${level}` });
  }

  // --- the frame shared by the pages: user, navigation badge, toasts, messages ---------

  const me = { username: "", role: "", capabilities: new Set() };
  const can = (capability) => me.capabilities.has(capability);

  async function loadMe() {
    const who = await call("GET", "/users/me");
    me.username = who.username;
    me.role = who.role;
    me.capabilities = new Set(who.capabilities);
    $("user-name").textContent = who.username;
    $("user-role").textContent = who.role;
    $("user").hidden = false;
    $("nav").hidden = false;
    if (document.body.dataset.page === "tasks") {
      $("nav-review").setAttribute("aria-current", "page");
    }
    for (const node of document.querySelectorAll("[data-needs]")) {
      node.hidden = !can(node.dataset.needs);
    }
  }

  function setBadge(count) {
    $("pending-count").textContent = String(count);
    $("pending-badge").hidden = false;
    $("pending-badge").dataset.count = String(count);
  }

  function toast(text, kind, ms) {
    const close = el("button", { type: "button", "aria-label": "Dismiss notification" }, "×");
    const node = el("div", { class: `toast ${kind || ""}` }, el("p", { text }), close);
    const remove = () => node.remove();
    close.addEventListener("click", remove);
    $("toasts").append(node);
    setTimeout(remove, ms || 10000);
    return node;
  }

  function showNotice(text) {
    const box = $("notice");
    box.textContent = text;
    box.hidden = !text;
  }

  const EXPLAIN = {
    human_task_expired: "task expired (the decision deadline passed)",
    run_state_conflict: "already decided, or not the step waiting for a decision",
    not_found: "not found, or not in your organisations",
    self_approval_forbidden: "you requested the task; another expert must approve it",
    duplicate_approver: "you already approved this step; another expert must approve it",
    step_hash_mismatch: "the step changed since you opened it",
    forbidden: "your role may not do this",
    invalid_decision: "this decision does not fit the step",
    kubernetes_unavailable: "the cluster is unreachable; try again",
    platform_admin_required: "only a platform administrator may do this",
    platform_capability: "access.manage belongs to platform administrators, never to a role",
    role_not_grantable: "you may not give this role",
    unknown_capability: "no endpoint checks that capability",
    invalid_role: "a role needs a capability, and roles users hold must stay",
  };

  function explain(err) {
    if (err.code === "human_task_expired") {
      return "Task expired: the decision deadline passed, so it can no longer be decided.";
    }
    const why = EXPLAIN[err.code];
    return why ? `${err.message} (${err.code}: ${why})` : `${err.message} (${err.code})`;
  }

  // The accessible rejection dialog; resolves to the feedback, or null when cancelled.
  function askFeedback(what, opener) {
    return askText("reject", "reject-feedback", what, "Feedback is required to reject.", opener,
      () => $("queue-title") || $("decide-title") || $("main"));
  }

  // Decisions on one step. Every way of deciding (approve, reject, provide, edit, select,
  // bulk, resolve) needs `run.control`, the capability of the seeds' resume.
  function stepPath(id) {
    const [namespace, name, step] = id.split("/");
    return `/agentic/tasks/${encodeURIComponent(namespace)}/${encodeURIComponent(name)}` +
      `/steps/${encodeURIComponent(step)}`;
  }

  function approve(id, stepHash) {
    const body = stepHash ? { stepHash } : {};
    return call("POST", `${stepPath(id)}/approve`, body, newKey());
  }

  function reject(id, feedback, stepHash) {
    const body = stepHash ? { feedback, stepHash } : { feedback };
    return call("POST", `${stepPath(id)}/reject`, body, newKey());
  }

  function resume(id, body) {
    const [namespace, name, step] = id.split("/").map(encodeURIComponent);
    return call("POST", `/human-tasks/${namespace}/${name}/${step}/resume`, body, newKey());
  }

  function approvedText(outcome, label) {
    if (outcome.decided === false) {
      return `Approval recorded for ${label}: ${outcome.approvals} of ` +
        `${outcome.required_approvals} required approvals.`;
    }
    return `Approved: ${label}.`;
  }

  // --- the queue -----------------------------------------------------------------------

  const queue = {
    items: new Map(), // id -> item
    rows: new Map(), // id -> <tr>
    selected: new Set(),
    toasted: new Set(JSON.parse(sessionStorage.getItem(TOASTED) || "[]")),
    lastCount: null,
  };

  function detailHref(id) {
    if (id.startsWith("replies/")) {  // a draft reply's own page
      return `/workspace/replies/${encodeURIComponent(id.slice(8))}`;
    }
    return `/workspace/tasks/${id.split("/").map(encodeURIComponent).join("/")}`;
  }

  function label(item) {
    return `"${item.summary}", step "${item.step_description}"`;
  }

  function deadlineCell(item, now) {
    const cell = el("td", { class: "deadline", "data-label": "Deadline" });
    if (!item.deadline) {
      cell.append(el("span", { class: "sub", text: "none" }));
      return cell;
    }
    cell.append(el("time", {
      datetime: item.deadline,
      title: new Date(item.deadline).toLocaleString(),
      text: `${absolute(item.deadline)} · ${relative(item.deadline, now)}`,
    }));
    if (Date.parse(item.deadline) <= now) cell.append(pill("overdue", "overdue"));
    else if (item.near_deadline) cell.append(pill("due soon", "warn"));
    return cell;
  }

  function requestCell(item) {
    const step = [item.step_description, item.tool].filter(Boolean).join(" · ");
    return el(
      "td",
      { class: "request", "data-label": "Request" },
      el("a", { href: detailHref(item.id), text: item.summary }),
      el("div", {
        class: "step-line",
        text: item.kind === "reply" ? `Draft: ${item.step_description}` : `Step: ${step}`,
      }),
    );
  }

  function buildRow(item) {
    const row = el("tr", { "data-id": item.id });
    row._check = null;
    row._select = null;
    row._actions = null;
    if (!can("run.control")) return row; // no controls the user may not use
    if (item.status === "waiting_for_client") {  // approved; the client must confirm it
      row._select = el("td", { class: "col-select" });
      row._actions = el("td", { class: "col-actions", "data-label": "Decide" },
        el("div", { class: "row-actions" }, el("a", {
          href: detailHref(item.id),
          class: "button-link",
          text: "Waiting for the client…",
          "aria-label": `Waiting for the client to confirm ${label(item)}`,
        })));
      return row;
    }
    if (item.status === "failed") {
      // a failed step is retried (or left) in the detail view
      const verb = item.requested_by === me.username ? "Details" : "Retry";
      row._select = el("td", { class: "col-select" });
      row._actions = el("td", { class: "col-actions", "data-label": "Decide" },
        el("div", { class: "row-actions" }, el("a", {
          href: detailHref(item.id),
          class: "button-link",
          text: `${verb}…`,
          "aria-label": `${verb} ${label(item)}`,
        })));
      return row;
    }
    if (item.kind === "reply") {  // a draft reply is decided on its own page
      row._select = el("td", { class: "col-select" });
      row._actions = el("td", { class: "col-actions", "data-label": "Decide" }, el(
        "div",
        { class: "row-actions" },
        el("a", {
          href: detailHref(item.id),
          class: "button-link",
          text: "Review…",
          "aria-label": `Review the draft reply to "${item.summary}"`,
        }),
      ));
      return row;
    }
    const check = el("input", { type: "checkbox", "aria-label": `Select ${label(item)}` });
    check.addEventListener("change", () => {
      if (check.checked) queue.selected.add(item.id);
      else queue.selected.delete(item.id);
      syncSelection();
    });
    row._check = check;
    row._select = el("td", { class: "col-select" }, check);
    const actions = el("div", { class: "row-actions" });
    if (item.kind === "input" || item.requested_by === me.username || item.status === "outcome_unknown") {
      // an input step is answered in the detail view, and an unknown outcome resolved
      // there; a requester may not approve its own
      const verb = item.status === "outcome_unknown" && item.requested_by !== me.username
        ? "Resolve"
        : item.kind === "input" && can("run.control") ? "Answer" : "Details";
      actions.append(el("a", {
        href: detailHref(item.id),
        class: "button-link",
        text: `${verb}…`,
        "aria-label": `${verb} ${label(item)}`,
      }));
    } else {
      const approveButton = el("button", {
        type: "button",
        class: "primary",
        "data-action": "approve",
        "aria-label": `Approve ${label(item)}`,
        text: "Approve",
      });
      approveButton.addEventListener("click", () => approveRow(item.id, approveButton));
      actions.append(approveButton);
    }
    const rejectButton = el("button", {
      type: "button",
      class: "danger",
      "data-action": "reject",
      "aria-label": `Reject ${label(item)}`,
      "aria-haspopup": "dialog",
      text: "Reject…",
    });
    rejectButton.addEventListener("click", () => rejectRow(item.id, rejectButton));
    actions.append(rejectButton);
    row._actions = el("td", { class: "col-actions", "data-label": "Decide" }, actions);
    return row;
  }

  function fillRow(row, item, now) {
    const short = item.run_id.slice(0, 8);
    const cells = [
      row._select,
      deadlineCell(item, now),
      el("td", { class: "meta", "data-label": "Workflow", text: item.workflow }),
      requestCell(item),
      el("td", { class: "meta", "data-label": "Status" }, pill(item.status, item.status)),
      el("td", { class: "meta", "data-label": "Risk" }, risk(item.risk)),
      el("td", { class: "meta", "data-label": "Run" }, el("code", { title: item.run_id, text: short })),
      row._actions,
    ].filter(Boolean);
    // keep the interactive cells (and so the focus) where they are; replace the others
    const focused = row.contains(document.activeElement) ? document.activeElement : null;
    const link = row.querySelector("td.request a");
    if (link && focused === link) {
      cells[cells.findIndex((cell) => cell.classList.contains("request"))] = link.closest("td");
    }
    if (row.children.length === cells.length) {
      cells.forEach((cell, i) => {
        if (row.children[i] !== cell) row.replaceChild(cell, row.children[i]);
      });
    } else {
      row.replaceChildren(...cells);
    }
    row.classList.toggle("selected", queue.selected.has(item.id));
    if (row._check) row._check.checked = queue.selected.has(item.id);
  }

  function renderQueue(page) {
    const now = Date.now();
    setBadge(page.pending_count);
    const body = $("queue-body");
    const wanted = page.items.map((item) => item.id);
    const keep = new Set(wanted);
    let lostFocus = false;
    for (const [id, row] of queue.rows) {
      if (!keep.has(id)) {
        if (row.contains(document.activeElement)) lostFocus = true;
        row.remove();
        queue.rows.delete(id);
        queue.selected.delete(id);
      }
    }
    queue.items = new Map(page.items.map((item) => [item.id, item]));
    page.items.forEach((item, index) => {
      let row = queue.rows.get(item.id);
      if (!row) {
        row = buildRow(item);
        queue.rows.set(item.id, row);
      }
      fillRow(row, item, now);
      if (body.children[index] !== row) body.insertBefore(row, body.children[index] || null);
    });
    if (lostFocus) $("queue-title").focus();
    $("queue-empty").hidden = page.items.length > 0;
    $("queue").hidden = page.items.length === 0;
    const shown = page.items.length < page.total ? ` (showing ${page.items.length})` : "";
    $("queue-meta").textContent = `${plural(page.total, "decision")} waiting${shown}, ` +
      `deadline first · updated ${new Date(now).toLocaleTimeString()}`;
    if (queue.lastCount !== null && queue.lastCount !== page.pending_count) {
      announce(`${plural(page.pending_count, "decision")} waiting.`);
    }
    queue.lastCount = page.pending_count;
    syncSelection();
    for (const item of page.items) {
      if (item.near_deadline && !queue.toasted.has(item.id)) {
        queue.toasted.add(item.id);
        const when = item.deadline ? relative(item.deadline, now) : "soon";
        toast(`Deadline near: ${label(item)} is due ${when}.`, "warn", 15000);
      }
    }
    sessionStorage.setItem(TOASTED, JSON.stringify([...queue.toasted].slice(-500)));
  }

  function syncSelection() {
    const count = queue.selected.size;
    const total = queue.rows.size;
    for (const [id, row] of queue.rows) {
      const on = queue.selected.has(id);
      if (row._check) row._check.checked = on;
      row.classList.toggle("selected", on);
    }
    const all = $("select-all");
    all.checked = total > 0 && count === total;
    all.indeterminate = count > 0 && count < total;
    $("selected-count").textContent = `${count} selected`;
    $("approve-selected").disabled = count === 0;
    $("reject-selected").disabled = count === 0;
  }

  async function refreshQueue() {
    try {
      const page = await call("GET", "/human-tasks?limit=200");
      renderQueue(page);
      return true;
    } catch (err) {
      if (err.status !== 401) {
        $("queue-meta").textContent = `Live updates interrupted: ${explain(err)} Retrying…`;
      }
      return false;
    }
  }

  // --- the live event stream (notify): GET /human-tasks/events pushes every change of the
  // caller's orgs; polling is only the fallback while the stream is down (common.js reads
  // it; `stream` keeps the last event id for a reconnect).

  const stream = { lastId: "" };

  // `live`: refresh on the task event stream (polling while it is down); the agents page
  // polls, since an agent's health is not a task event
  function schedule(refresh, live = true) {
    let queued = false;
    const changed = () => {
      if (queued) return;
      queued = true;
      setTimeout(async () => {
        queued = false;
        await refresh();
      }, 100);
    };
    liveUpdates("/human-tasks/events", {
      refresh,
      onEvent: changed,
      interval: pollInterval(),
      cursor: stream,
      stream: live && new URLSearchParams(location.search).get("stream") !== "off",
    });
    document.addEventListener("visibilitychange", () => {
      if (document.visibilityState === "visible") refresh();
    });
  }

  function busy(id, on) {
    const row = queue.rows.get(id);
    if (!row) return;
    row.setAttribute("aria-busy", on ? "true" : "false");
    for (const button of row.querySelectorAll("button")) button.disabled = on;
  }

  async function decided(err, item) {
    showNotice("");
    showMessage(err.code === "human_task_expired"
      ? `Task expired: ${label(item)} can no longer be decided (the decision deadline passed).`
      : `Could not decide ${label(item)}: ${explain(err)}`);
    await refreshQueue();
  }

  async function approveRow(id, button) {
    const item = queue.items.get(id);
    if (!item) return;
    busy(id, true);
    try {
      const outcome = await approve(id);
      showMessage("");
      showNotice(approvedText(outcome, label(item)));
      await refreshQueue();
    } catch (err) {
      await decided(err, item);
    } finally {
      busy(id, false);
      if (!button.isConnected) $("queue-title").focus();
    }
  }

  async function rejectRow(id, button) {
    const item = queue.items.get(id);
    if (!item) return;
    const feedback = await askFeedback(`Reject ${label(item)}. The task halts.`, button);
    if (feedback === null) return;
    busy(id, true);
    try {
      await reject(id, feedback);
      showMessage("");
      showNotice(`Rejected: ${label(item)}.`);
      await refreshQueue();
    } catch (err) {
      await decided(err, item);
    } finally {
      busy(id, false);
      if (!button.isConnected) $("queue-title").focus();
    }
  }

  function showBulk(result, action, names) {
    const box = $("bulk-result");
    box.classList.toggle("ok", result.failed === 0);
    box.classList.toggle("partial", result.failed > 0);
    const verb = action === "approve" ? "Approve" : "Reject";
    $("bulk-summary").textContent = `${verb} selected: ${result.summary}`;
    const reasons = $("bulk-reasons");
    reasons.replaceChildren();
    for (const [code, ids] of Object.entries(result.failures)) {
      const why = EXPLAIN[code] ? ` — ${EXPLAIN[code]}` : "";
      const which = ids.map((id) => names.get(id) || id).join("; ");
      reasons.append(el(
        "li",
        { "data-code": code },
        el("strong", { text: `${code}: ${ids.length}` }),
        `${why}. ${which}`,
      ));
    }
    box.hidden = false;
    $("bulk-summary").focus();
  }

  async function bulk(action, opener) {
    const ids = [...queue.selected];
    if (ids.length === 0) return;
    const names = new Map(ids.map((id) => [id, queue.items.get(id) ? label(queue.items.get(id)) : id]));
    const body = { ids, action };
    if (action === "reject") {
      const feedback = await askFeedback(
        `Reject ${plural(ids.length, "selected step")}. Each task halts.`,
        opener,
      );
      if (feedback === null) return;
      body.feedback = feedback;
    }
    for (const id of ids) busy(id, true);
    $("approve-selected").disabled = true;
    $("reject-selected").disabled = true;
    try {
      const result = await call("POST", "/human-tasks/bulk-resume", body, newKey());
      showMessage("");
      showNotice("");
      queue.selected.clear();
      showBulk(result, action, names);
    } catch (err) {
      showMessage(`Could not ${action} the selected tasks: ${explain(err)}`);
    } finally {
      for (const id of ids) busy(id, false);
      await refreshQueue();
    }
  }

  async function queuePage() {
    await loadMe();
    $("select-all").addEventListener("change", (event) => {
      if (event.target.checked) for (const id of queue.rows.keys()) queue.selected.add(id);
      else queue.selected.clear();
      syncSelection();
    });
    $("approve-selected").addEventListener("click", (e) => bulk("approve", e.currentTarget));
    $("reject-selected").addEventListener("click", (e) => bulk("reject", e.currentTarget));
    $("bulk-dismiss").addEventListener("click", () => {
      $("bulk-result").hidden = true;
      $("queue-title").focus();
    });
    $("bulkbar").hidden = !can("run.control");
    await refreshQueue();
    schedule(refreshQueue);
  }

  // --- the detail view -----------------------------------------------------------------

  const detail = { data: null, panelFor: null };

  function facts(pairs) {
    const list = [];
    for (const [term, value] of pairs) {
      if (value === null || value === undefined || value === "") continue;
      list.push(el("dt", { text: term }), el("dd", {}, value));
    }
    return list;
  }

  const STATE_KIND = {
    Pending: "pending", Escalated: "escalated", Approved: "ok", Executing: "pending",
    Executed: "ok", Failed: "bad", Rejected: "bad", Expired: "bad",
    pending: "pending", escalated: "escalated", decided: "ok", expired: "overdue",
    waiting: "muted", closed: "muted", outcome_unknown: "overdue", OutcomeUnknown: "overdue",
    failed: "bad", waiting_for_client: "muted", AwaitingClient: "muted",
  };

  function describeDecision(decision) {
    const verdicts = {
      approve: "Approved", edit: "Approved with edited parameters", provide: "Input provided",
      select: "Option selected", reject: "Rejected",
    };
    const parts = [
      el("p", {}, `${verdicts[decision.verdict] || decision.verdict} by `,
        el("strong", { text: decision.by }), ` · ${absolute(decision.at)}`),
    ];
    if (decision.feedback) parts.push(el("p", { class: "feedback", text: `“${decision.feedback}”` }));
    if (decision.parameters) parts.push(el("pre", { text: json(decision.parameters) }));
    if (decision.input) parts.push(el("pre", { text: json(decision.input) }));
    if (decision.selection) parts.push(el("p", { text: `Selected: ${decision.selection}` }));
    return el("div", { class: "step-part decision" }, el("strong", { text: "Decision" }), parts);
  }

  function describeExecution(run) {
    const when = run.finished_at ? ` · finished ${absolute(run.finished_at)}` :
      run.started_at ? ` · started ${absolute(run.started_at)}` : "";
    const kind = run.state === "Succeeded" ? "ok" : run.state === "Failed" ? "bad" : "pending";
    const parts = [el("p", {}, pill(run.state, kind), ` attempt ${run.attempt}${when}`)];
    if (run.result_summary) parts.push(el("pre", { class: "result", text: json(run.result_summary) }));
    if (run.error) parts.push(el("p", { class: "error", text: run.error }));
    return el("div", { class: "step-part execution" }, el("strong", { text: "Execution" }), parts);
  }

  // a step of an org's MCP tool: the text of the tool definition it pins, beside the hash
  // (what an approval covers); none when the platform does not know that definition
  function describeDefinition(pin) {
    const parts = [el("strong", { text: "Tool definition (pinned)" })];
    if (pin.definition) {
      const { name, description, inputSchema } = pin.definition;
      parts.push(
        el("p", {}, el("code", { class: "tool-name", text: name }), " · ",
          el("span", { class: "tool-description", text: description || "(no description)" })),
        el("pre", { class: "input-schema", "aria-label": "Input schema", text: json(inputSchema) }),
      );
    } else {
      const why = !pin.pinned ? "The step pins no tool definition"
        : !pin.current ? "The org's MCP server has no such tool"
        : "The tool's definition changed since this step was planned";
      parts.push(el("p", { class: "error", role: "note",
        text: `${why}: an approval is refused, and the agent must plan the step again.` }));
    }
    parts.push(el("p", { class: "pin" }, "Pinned ", el("code", { text: pin.pinned || "nothing" })));
    return el("div", { class: "step-part tool-definition" }, parts);
  }

  function planItem(step, index, current) {
    const state = step.state || "Pending";
    const head = el(
      "div",
      { class: "step-head" },
      el("span", { class: "step-no", "aria-hidden": "true", text: String(index + 1) }),
      el("h3", { text: step.description }, el("span", { class: "sr-only", text: ` (step ${index + 1})` })),
      risk(step.risk),
      pill(state, STATE_KIND[state] || "muted"),
    );
    const info = el("dl", { class: "facts" }, facts([
      ["Step id", el("code", { text: step.id })],
      ["Kind", step.kind],
      ["Tool", step.tool ? el("code", { text: step.tool }) : null],
      ["Options", step.options ? step.options.join(", ") : null],
      ["Deadline", step.deadline && !step.decision ? absolute(step.deadline) : null],
      ["Approvals", step.required_approvals > 1
        ? `${step.approvals.length} of ${step.required_approvals}` : null],
    ]));
    const parts = [head, info];
    if (step.kind === "action" || Object.keys(step.parameters).length > 0) {
      parts.push(el("div", { class: "step-part" }, el("strong", { text: "Parameters" }),
        el("pre", { class: "parameters", text: json(step.parameters) })));
    }
    if (step.tool_definition) parts.push(describeDefinition(step.tool_definition));
    if (step.decision) parts.push(describeDecision(step.decision));
    if (step.execution) parts.push(describeExecution(step.execution));
    return el("li", {
      class: current ? "current" : "",
      "aria-current": current ? "step" : null,
      "data-step": step.id,
    }, parts);
  }

  function renderThread(conversation) {
    const list = $("thread");
    if (!conversation) {
      $("redactions").textContent = "This task names no conversation.";
      list.replaceChildren();
      return;
    }
    const counts = Object.entries(conversation.redactions)
      .map(([kind, n]) => `${n} ${kind}`).join(", ");
    $("redactions").textContent = `${conversation.subject} · ` +
      (counts ? `redacted: ${counts}` : "nothing needed redacting");
    list.replaceChildren(...conversation.messages.map((m) => el(
      "li",
      {},
      el("span", { class: "who", text: `${m.author} (${m.role})` }),
      " ",
      el("time", { class: "when", datetime: m.created_at, text: absolute(m.created_at) }),
      el("p", { text: m.content }),
    )));
    if (conversation.messages.length === 0) list.append(el("li", { text: "No messages." }));
  }

  // the revision loop: what a revised plan changed against the rejected plan
  function renderRevision(revision) {
    const section = $("revision");
    section.hidden = !revision;
    if (!revision) return;
    const said = revision.feedback ? ` · feedback: “${revision.feedback}”` : "";
    $("revision-of").textContent = `Revises ${revision.revision_of}${said}`;
    const show = (value) => (value === null || value === undefined ? "—" : JSON.stringify(value));
    const items = [
      ...revision.added.map((id) => el("li", { class: "added", text: `Added step ${id}` })),
      ...revision.removed.map((id) => el("li", { class: "removed", text: `Removed step ${id}` })),
      ...revision.changed.map((change) => el(
        "li",
        { class: "changed" },
        `Changed step ${change.step_id}: `,
        [...Object.entries(change.fields), ...Object.entries(change.parameters)]
          .map(([name, v]) => `${name} ${show(v.before)} → ${show(v.after)}`)
          .join("; "),
      )),
    ];
    if (items.length === 0) items.push(el("li", { text: "The same plan." }));
    $("revision-changes").replaceChildren(...items);
  }

  function renderDetail(data) {
    detail.data = data;
    const now = Date.now();
    $("detail-title").textContent = `Task ${data.task_id.split("/")[1]} · step ${data.step_id}`;
    const bits = [`${data.workflow}`, `phase ${data.phase}`];
    if (data.archived) bits.push("archived");
    $("detail-meta").textContent = bits.join(" · ");
    $("prompt").textContent = data.prompt;
    const open = data.status === "pending" || data.status === "escalated";
    const deadline = data.deadline && open ? el("span", {},
      el("time", { datetime: data.deadline, text: `${absolute(data.deadline)} · ${relative(data.deadline, now)}` }),
      data.near_deadline ? [" ", pill("due soon", "warn")] : null) : null;
    $("facts").replaceChildren(...facts([
      ["Status", pill(data.status, STATE_KIND[data.status] || data.status)],
      ["Risk", risk(data.risk)],
      ["Deadline", deadline],
      ["Escalations", data.escalations ? String(data.escalations) : null],
      ["Requested by", data.requested_by],
      ["Workflow", data.workflow],
      ["Run", el("code", { text: data.run_id })],
      ["Task", el("code", { text: data.task_id })],
    ]));
    $("plan").replaceChildren(...data.plan.map((step, i) => planItem(step, i, step.id === data.step_id)));
    renderThread(data.conversation);
    renderRevision(data.revision);
    const panelKey = `${data.status}|${data.phase}`;
    if (detail.panelFor !== panelKey) {
      detail.panelFor = panelKey;
      renderPanel(data);
    }
  }

  function renderPanel(data) {
    renderDecision(data);
    const live = data.phase === "PendingApproval" || data.phase === "InProgress";
    if (!live || !can("run.control")) return; // no control the user may not use
    const [namespace, name] = data.task_id.split("/").map(encodeURIComponent);
    const cancelButton = el("button", { type: "button", class: "danger", text: "Cancel task" });
    cancelButton.addEventListener("click", async () => {
      if (!window.confirm("Cancel this task for good? No further step will run.")) return;
      await submitDecision(
        () => call("POST", `/agentic/tasks/${namespace}/${name}/cancel`),
        cancelButton,
        "Cancel requested: the task stops.",
      );
    });
    $("decide-body").append(el("div", { class: "actions cancel-task" }, cancelButton));
  }

  // An expired decision of a task that still waits (policy onExpiry: AwaitReopen): an
  // expert with run.control gives it a new deadline (POST /human-tasks/{id}/reopen).
  function renderReopen(data) {
    if (data.phase !== "PendingApproval" || !can("run.control")) return;
    const path = data.id.split("/").map(encodeURIComponent).join("/");
    const button = el("button", { type: "button", class: "primary", text: "Reopen with a new deadline" });
    button.addEventListener("click", () => submitDecision(
      () => call("POST", `/human-tasks/${path}/reopen`, {}),
      button,
      "Reopened: the step can be decided again until its new deadline.",
    ));
    $("decide-body").append(el("div", { class: "actions" }, button));
  }

  function renderDecision(data) {
    const panel = $("decide");
    const body = $("decide-body");
    const step = data.plan.find((s) => s.id === data.step_id);
    body.replaceChildren();
    panel.hidden = false;
    if (data.status === "outcome_unknown") {
      renderResolve(data, step);
      return;
    }
    if (data.status === "failed") {
      renderRetry(data, step);
      return;
    }
    const open = data.status === "pending" || data.status === "escalated";
    if (!open) {
      const why = {
        decided: "This step has its decision (see the plan).",
        expired: "Task expired: the decision deadline passed, so this step can no longer be decided.",
        waiting: "An earlier step of this plan waits for its decision or execution first.",
        closed: `The task ended (${data.phase}) before this step was decided.`,
      };
      body.append(el("p", { text: why[data.status] || data.status }));
      if (data.status === "expired") renderReopen(data);
      if (data.status === "waiting") {
        const first = data.plan.find((s) => !s.decision && (s.state === "Pending" || s.state === "Escalated"));
        if (first) {
          const [ns, name] = data.task_id.split("/");
          body.append(el("p", {}, el("a", {
            href: detailHref(`${ns}/${name}/${first.id}`),
            text: `Open the step waiting for a decision: ${first.description}`,
          })));
        }
      }
      return;
    }
    const position = data.plan.indexOf(step) + 1;
    body.append(el("p", { class: "deciding" },
      `Step ${position} of ${data.plan.length}: `,
      el("strong", { text: step.description }), " ", risk(step.risk)));
    const decide = can("run.control");
    const control = can("run.control");
    if (!decide && !control) {
      body.append(el("p", { text: `Your role (${me.role}) may read this task but not decide it.` }));
      return;
    }
    const own = data.requested_by === me.username;
    if (step.required_approvals > 1) {
      body.append(el("p", { class: "sub", text:
        `This ${step.risk}-risk step needs ${step.required_approvals} approvals from different ` +
        `experts; ${step.approvals.length} so far.` }));
    }
    if (own) {
      body.append(el("p", { class: "sub", text:
        "You requested this task: another expert must approve it. You may still reject it." }));
    }
    const id = data.id;
    const buttons = el("div", { class: "actions" });
    if (decide && step.kind === "action" && !own) {
      const approveButton = el("button", { type: "button", class: "primary", text: "Approve" });
      approveButton.addEventListener("click", () =>
        submitDecision(() => approve(id, step.step_hash), approveButton));
      buttons.append(approveButton);
    }
    if (decide) {
      const rejectButton = el("button", {
        type: "button", class: "danger", text: "Reject…", "aria-haspopup": "dialog",
      });
      rejectButton.addEventListener("click", async () => {
        const feedback = await askFeedback(`Reject step "${step.description}". The task halts.`, rejectButton);
        if (feedback !== null) {
          await submitDecision(() => reject(id, feedback, step.step_hash), rejectButton, "Rejected.");
        }
      });
      buttons.append(rejectButton);
    }
    if (buttons.children.length) body.append(buttons);
    if (control && !(own && step.kind === "action")) {
      if (step.kind === "action") body.append(editForm(id, step));
      else if (step.options) body.append(selectForm(id, step));
      else body.append(provideForm(id, step));
    }
  }

  // A step whose approved tool call may or may not have taken effect: the expert checks
  // the upstream and says which (POST /human-tasks/{id}/resolve); never retried on its own.
  // What the platform knows (data.unknown_outcome) is shown first, then the two choices.
  function unknownFacts(known) {
    const facts = el("dl", { class: "facts", id: "unknown-facts" });
    const when = known.request_sent_at ? new Date(known.request_sent_at).toLocaleString() : "not recorded";
    for (const [term, value, id] of [
      ["Request sent at", when, "unknown-sent"],
      ["Upstream", `${known.integration || "?"} · ${known.operation || "?"}`, "unknown-upstream"],
      ["Attempt", String(known.attempt), "unknown-attempt"],
      ["Upstream answer", known.upstream_error || "none recorded", "unknown-error"],
      ["Read-back", `${known.read_back}: ${known.read_back_detail}`, "unknown-readback"],
      ["Proxy's claim", known.ledger, "unknown-ledger"],
    ]) facts.append(el("dt", { text: term }), el("dd", { id, text: value }));
    return facts;
  }

  function renderResolve(data, step) {
    const body = $("decide-body");
    const known = data.unknown_outcome || { choices: [] };
    body.append(el("p", { class: "deciding" },
      "Outcome unknown: ", el("strong", { text: step.description }), " ", risk(step.risk)));
    body.append(el("p", { text:
      "The approved call was sent, but its answer was lost (a timeout, a broken connection " +
      "or a server error after sending). Check the upstream, then say whether it took effect." }));
    if (data.unknown_outcome) body.append(unknownFacts(known));
    const effects = el("ul", { class: "choices", id: "unknown-choices" });
    for (const choice of known.choices) {
      effects.append(el("li", { "data-outcome": choice.outcome },
        el("strong", { text: `${choice.label}: ` }), choice.effect));
    }
    body.append(effects);
    if (!can("run.control")) {
      body.append(el("p", { text: `Your role (${me.role}) may read this task but not resolve it.` }));
      return;
    }
    if (data.requested_by === me.username) {
      body.append(el("p", { class: "sub", text:
        "You requested this task: another expert must resolve it." }));
      return;
    }
    const note = el("textarea", { id: "resolve-note", rows: "2", maxlength: "4096" });
    body.append(el("div", { class: "field" },
      el("label", { for: "resolve-note", text: "What you checked (optional)" }), note));
    const path = `/human-tasks/${data.id.split("/").map(encodeURIComponent).join("/")}/resolve`;
    const buttons = el("div", { class: "actions" });
    for (const choice of known.choices) {
      const { outcome } = choice;
      const kind = outcome === "applied" ? "primary" : "danger";
      const button = el("button", { type: "button", class: kind, "data-outcome": outcome, text: choice.label });
      button.addEventListener("click", () => submitDecision(
        () => call("POST", path, { outcome, note: note.value.trim() || null }),
        button,
        outcome === "applied"
          ? "Resolved: marked as executed; the step completes."
          : "Resolved: marked as not executed; the agent may call once more.",
      ));
      buttons.append(button);
    }
    body.append(buttons);
  }

  // a step whose tool call failed shows why; where the action catalog
  // says the action is safe to run twice, an expert retries it (POST /human-tasks/{id}/retry).
  function renderRetry(data, step) {
    const body = $("decide-body");
    const run = step.execution || {};
    body.append(el("p", { class: "deciding" },
      "Step failed: ", el("strong", { text: step.description }), " ", risk(step.risk)));
    body.append(el("p", { class: "error", id: "failure-reason", text: run.error || "no reason given" }));
    if (!step.retry_safe) {
      body.append(el("p", { text:
        "This action is not safe to run twice (a change by a delta), so the step stays failed. " +
        "Check the upstream; a new plan is a new task." }));
      return;
    }
    if (!can("run.control")) {
      body.append(el("p", { text: `Your role (${me.role}) may read this task but not retry it.` }));
      return;
    }
    if (data.requested_by === me.username) {
      body.append(el("p", { class: "sub", text: "You requested this task: another expert must retry it." }));
      return;
    }
    body.append(el("p", { text:
      "The action is safe to run again (a read, or a write that sets an absolute value). " +
      "Retrying reopens the task and the agent runs the step once more." }));
    const note = el("textarea", { id: "retry-note", rows: "2", maxlength: "4096" });
    body.append(el("div", { class: "field" },
      el("label", { for: "retry-note", text: "Why you retry (optional)" }), note));
    const path = `/human-tasks/${data.id.split("/").map(encodeURIComponent).join("/")}/retry`;
    const button = el("button", { type: "button", class: "primary", text: "Retry step" });
    button.addEventListener("click", () => submitDecision(
      () => call("POST", path, { note: note.value.trim() || null }),
      button,
      "Retry requested: the agent runs the step once more.",
    ));
    body.append(el("div", { class: "actions" }, button));
  }

  function noteField(prefix) {
    return el("div", { class: "field" },
      el("label", { for: `${prefix}-note`, text: "Note for the agent (optional)" }),
      el("input", { id: `${prefix}-note`, type: "text", maxlength: "4096" }));
  }

  function withNote(body, prefix) {
    const note = $(`${prefix}-note`).value.trim();
    if (note) body.feedback = note;
    return body;
  }

  // `message` in the error box beside `field` ("" clears it)
  function errorBeside(field, message) {
    fieldError(field, field.parentElement.querySelector(".error"), message);
  }

  function editForm(id, step) {
    const form = el("form", { id: "edit-form", novalidate: true, "aria-labelledby": "edit-title" });
    form.append(el("h3", { id: "edit-title", text: "Approve with edited parameters" }));
    form.append(el("p", { class: "hint", text:
      "Text values are sent as typed; numbers, true/false, lists and objects as JSON." }));
    const fields = [];
    Object.entries(step.parameters).forEach(([key, value], i) => {
      const inputId = `param-${i}`;
      const isText = typeof value === "string";
      const raw = isText ? value : json(value);
      const complex = value !== null && typeof value === "object";
      const input = complex
        ? el("textarea", { id: inputId, rows: "4", "data-key": key })
        : el("input", { id: inputId, type: "text", "data-key": key });
      input.value = raw;
      input.dataset.text = isText ? "1" : "";
      input.setAttribute("aria-describedby", `${inputId}-error`);
      fields.push(input);
      form.append(el("div", { class: "field" },
        el("label", { for: inputId }, el("code", { text: key })),
        input,
        el("p", { class: "error", id: `${inputId}-error`, hidden: true })));
    });
    if (fields.length === 0) {
      form.append(el("p", { class: "sub", text: "This step has no parameters to edit." }));
      return form;
    }
    form.append(noteField("edit"));
    const submit = el("button", { type: "submit", class: "primary", text: "Approve with these parameters" });
    form.append(el("div", { class: "actions" }, submit));
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      const parameters = {};
      let bad = null;
      for (const input of fields) {
        errorBeside(input, "");
        if (input.dataset.text) {
          parameters[input.dataset.key] = input.value;
          continue;
        }
        try {
          parameters[input.dataset.key] = JSON.parse(input.value);
        } catch (err) {
          errorBeside(input, "Not valid JSON: write a number, true/false, null, a list or an object.");
          bad = bad || input;
        }
      }
      if (bad) {
        bad.focus();
        return;
      }
      const body = withNote({ action: "edit", parameters, step_hash: step.step_hash }, "edit");
      await submitDecision(() => resume(id, body), submit, "Approved with edited parameters.");
    });
    return form;
  }

  function selectForm(id, step) {
    const form = el("form", { id: "select-form", novalidate: true });
    const set = el("fieldset", {}, el("legend", { text: "Choose one option" }));
    step.options.forEach((option, i) => {
      set.append(el("label", { class: "choice", for: `option-${i}` },
        el("input", { type: "radio", name: "option", id: `option-${i}`, value: option }),
        option));
    });
    const error = el("p", { class: "error", role: "alert", hidden: true });
    const submit = el("button", { type: "submit", class: "primary", text: "Select" });
    form.append(set, error, noteField("select"), el("div", { class: "actions" }, submit));
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      const chosen = form.querySelector("input[name=option]:checked");
      if (!chosen) {
        error.textContent = "Choose an option first.";
        error.hidden = false;
        form.querySelector("input[name=option]").focus();
        return;
      }
      error.hidden = true;
      const body = withNote({ action: "select", selection: chosen.value, step_hash: step.step_hash }, "select");
      await submitDecision(() => resume(id, body), submit, `Selected: ${chosen.value}.`);
    });
    return form;
  }

  function provideForm(id, step) {
    const form = el("form", { id: "provide-form", novalidate: true });
    const area = el("textarea", { id: "provide-content", rows: "6", "aria-describedby": "provide-hint provide-error" });
    const asJson = el("input", { type: "checkbox", id: "provide-json" });
    const submit = el("button", { type: "submit", class: "primary", text: "Provide" });
    form.append(
      el("div", { class: "field" },
        el("label", { for: "provide-content", text: "Your answer" }),
        area,
        el("p", { class: "hint", id: "provide-hint", text:
          "Sent as {\"text\": …}, or as it is when it is a JSON object and the box below is ticked." }),
        el("p", { class: "error", id: "provide-error", hidden: true })),
      el("label", { class: "choice", for: "provide-json" }, asJson, "Send as a JSON object"),
      noteField("provide"),
      el("div", { class: "actions" }, submit),
    );
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      errorBeside(area, "");
      let content;
      if (!area.value.trim()) {
        errorBeside(area, "Write an answer first.");
        area.focus();
        return;
      }
      if (asJson.checked) {
        try {
          content = JSON.parse(area.value);
        } catch (err) {
          content = null;
        }
        if (!content || typeof content !== "object" || Array.isArray(content)) {
          errorBeside(area, "Not a JSON object.");
          area.focus();
          return;
        }
      } else {
        content = { text: area.value };
      }
      const body = withNote({ action: "provide", content, step_hash: step.step_hash }, "provide");
      await submitDecision(() => resume(id, body), submit, "Input provided.");
    });
    return form;
  }

  async function submitDecision(send, button, done) {
    button.disabled = true;
    try {
      const outcome = await send();
      showMessage("");
      const text = done || approvedText(outcome, "this step");
      showNotice(text);
      announce(text);
      detail.panelFor = null;
      await refreshDetail();
      $("decide-title").focus();
    } catch (err) {
      showNotice("");
      showMessage(explain(err));
      detail.panelFor = null;
      await refreshDetail();
      $("decide-title").focus();
    } finally {
      if (button.isConnected) button.disabled = false;
    }
  }

  async function refreshDetail() {
    const box = $("detail").dataset;
    const path = [box.namespace, box.name, box.step].map(encodeURIComponent).join("/");
    try {
      renderDetail(await call("GET", `/human-tasks/${path}`));
    } catch (err) {
      if (err.status === 404) {
        $("detail-meta").textContent = "";
        showMessage("No such task in your organisations.");
        $("decide").hidden = true;
      } else if (err.status !== 401) {
        $("detail-meta").textContent = `Live updates interrupted: ${explain(err)} Retrying…`;
      }
    }
  }

  async function refreshBadge() {
    try {
      const page = await call("GET", "/human-tasks?limit=1");
      setBadge(page.pending_count);
    } catch (err) {
      // the badge keeps its last value; the page shows the interruption
    }
  }

  async function detailPage() {
    await loadMe();
    await Promise.all([refreshDetail(), refreshBadge()]);
    schedule(() => Promise.all([refreshDetail(), refreshBadge()]));
  }

  // --- a draft reply ---------------------------------------------------------------------

  const reply = { filled: false };

  function replyPath() {
    return `/human-tasks/replies/${encodeURIComponent($("reply").dataset.reply)}`;
  }

  function renderReply(data) {
    const percent = `${Math.round(data.confidence * 100)}%`;
    $("reply-meta").textContent = `${data.agent} · ${data.state} · confidence ${percent}`;
    $("client-message").textContent = data.client_message;
    $("facts").replaceChildren(...facts([
      ["State", pill(data.state, STATE_KIND[data.state] || "muted")],
      ["Confidence", percent],
      ["Risk", risk(data.risk)],
      ["Flagged for review", data.flag_for_review ? "yes" : "no"],
      ["Asked by", data.requested_by],
      ["Decided by", data.decided_by],
      ["Sent", data.sent_text],
      ["Feedback", data.feedback],
    ]));
    $("reply-draft").textContent = data.draft;
    renderThread(data.conversation);
    const open = data.state === "pending" && can("run.control");
    $("reply-form").hidden = !open;
    if (open && !reply.filled) {
      $("reply-text").value = data.draft;
      reply.filled = true;
    }
  }

  async function refreshReply() {
    try {
      renderReply(await call("GET", replyPath()));
    } catch (err) {
      if (err.status === 404) {
        $("reply-meta").textContent = "";
        showMessage("No such draft reply in your organisations.");
      } else if (err.status !== 401) {
        $("reply-meta").textContent = `Live updates interrupted: ${explain(err)} Retrying…`;
      }
    }
  }

  async function decideReply(body, button, done) {
    button.disabled = true;
    try {
      await call("POST", `${replyPath()}/resume`, body, newKey());
      showMessage("");
      showNotice(done);
      announce(done);
    } catch (err) {
      showNotice("");
      showMessage(explain(err));
    } finally {
      await refreshReply();
      if (button.isConnected) button.disabled = false;
      $("decide-title").focus();
    }
  }

  async function replyPage() {
    await loadMe();
    $("reply-approve").addEventListener("click", (event) => decideReply(
      { action: "approve" }, event.currentTarget, "Sent the draft to the client.",
    ));
    $("reply-edit").addEventListener("click", (event) => {
      const text = $("reply-text").value.trim();
      fieldError($("reply-text"), $("reply-error"), text ? "" : "Write the reply to send.");
      if (text) decideReply({ action: "edit", text }, event.currentTarget, "Sent your edit to the client.");
    });
    $("reply-reject").addEventListener("click", async (event) => {
      const button = event.currentTarget;
      const feedback = await askFeedback("this draft reply", button);
      if (feedback) {
        await decideReply({ action: "reject", feedback }, button, "Rejected: nothing was sent.");
      }
    });
    await Promise.all([refreshReply(), refreshBadge()]);
    schedule(() => Promise.all([refreshReply(), refreshBadge()]));
  }

  // --- the agents page (each agent of the caller's orgs with its health) -----------------

  function phasePill(phase) {
    const kinds = { Ready: "ok", Degraded: "warn", Failed: "bad", Paused: "muted" };
    return pill(phase || "Pending", kinds[phase] || "pending");
  }

  function since(iso, now) {
    const seconds = Math.round((Date.parse(iso) - now) / 1000);
    const text = duration(Math.abs(seconds));
    return seconds >= 0 ? `in ${text}` : `${text} ago`;
  }

  function whenCell(iso, now, cls) {
    if (!iso) return el("td", { class: cls, text: "never" });
    return el("td", { class: cls }, el("time", { datetime: iso, title: absolute(iso), text: since(iso, now) }));
  }

  function conditionsCell(conditions) {
    const failing = (conditions || []).filter((c) => c.status !== "True");
    if (!failing.length) return el("td", { text: "all true" });
    return el("td", {}, failing.map((c) => el("span", { class: "condition", title: c.message || "" }, pill(`${c.type}: ${c.reason || c.status}`, "warn"))));
  }

  function agentRow(org, agent, now) {
    const h = agent.health;
    const config = h.config.inSync ? pill("applied", "ok") : pill(h.config.applied ? "outdated" : "pending", "warn");
    return el(
      "tr",
      { "data-id": agent.id },
      el("td", { text: org.name }),
      el("th", { scope: "row" }, el("code", { text: agent.name, title: agent.id })),
      el("td", {}, phasePill(h.phase)),
      el("td", { class: "ready", text: `${h.readyReplicas || 0}/${h.desiredReplicas}` }),
      whenCell(h.tokenExpiresAt, now, "token"),
      el("td", { class: "config", title: h.config.desired || "" }, config),
      whenCell(h.lastHeartbeat, now, "heartbeat"),
      el("td", { class: "open-tasks", text: String(h.openTasks) }),
      conditionsCell(h.conditions),
    );
  }

  async function refreshAgents() {
    try {
      await loadAgents();
      $("message").hidden = true;
    } catch (err) {
      if (err.status !== 401) showMessage(`Live updates interrupted: ${explain(err)} Retrying…`);
    }
  }

  async function loadAgents() {
    const orgs = await call("GET", "/orgs");
    const now = Date.now();
    const rows = [];
    let deactivated = 0;
    for (const org of orgs) {
      if (org.deactivated_at) deactivated += 1;
      let agents = [];
      try {
        agents = await call("GET", `/orgs/${org.id}/agents`);
      } catch (err) {
        if (err.status !== 403 && err.status !== 404) throw err;
      }
      for (const agent of agents) rows.push(agentRow(org, agent, now));
    }
    $("agents-body").replaceChildren(...rows);
    $("agents-empty").hidden = rows.length > 0;
    const note = deactivated ? ` · ${plural(deactivated, "organisation")} deactivated` : "";
    $("agents-meta").textContent = `${plural(rows.length, "agent")} in ${plural(orgs.length, "organisation")}${note}`;
  }

  async function agentsPage() {
    await loadMe();
    $("nav-agents").setAttribute("aria-current", "page");
    await Promise.all([refreshAgents(), refreshBadge()]);
    schedule(() => Promise.all([refreshAgents(), refreshBadge()]), false);
  }

  // --- the access map (GET|PUT /access-map, access.manage) -------------------------------

  function renderAccess(map) {
    const caps = map.capabilities;
    $("access-head").replaceChildren(
      el("th", { scope: "col", text: "Role" }),
      ...caps.map((c) => el("th", { scope: "col" }, el("code", { text: c }))));
    $("access-body").replaceChildren(...Object.keys(map.roles).map((role) => el("tr", {},
      el("th", { scope: "row", text: role }),
      ...caps.map((c) => el("td", {}, el("input", {
        type: "checkbox", "data-role": role, "data-capability": c,
        "aria-label": `${role}: ${c}`, checked: map.roles[role].includes(c),
      }))))));
    $("access-form").hidden = false;
  }

  async function saveAccess(event) {
    event.preventDefault();
    const roles = {};
    for (const box of document.querySelectorAll("#access-body input[type=checkbox]")) {
      roles[box.dataset.role] = roles[box.dataset.role] || [];
      if (box.checked) roles[box.dataset.role].push(box.dataset.capability);
    }
    const button = $("access-save");
    button.disabled = true;
    try {
      renderAccess(await call("PUT", "/access-map", { roles }));
      showMessage("");
      showNotice("Access map saved: in effect at everyone's next request.");
    } catch (err) {
      showNotice("");
      showMessage(explain(err));
      renderAccess(await call("GET", "/access-map"));
    } finally {
      button.disabled = false;
    }
  }

  async function accessPage() {
    await loadMe();
    $("nav-access").setAttribute("aria-current", "page");
    await refreshBadge();
    if (!can("access.manage")) {
      showMessage(`Your role (${me.role}) may not read the access map (platform administrators only).`);
      return;
    }
    renderAccess(await call("GET", "/access-map"));
    $("access-form").addEventListener("submit", saveAccess);
  }

  // --- start ---------------------------------------------------------------------------

  start(explain, {
    tasks: queuePage,
    task: detailPage,
    reply: replyPage,
    agents: agentsPage,
    access: accessPage,
  });
})();
