// The client portal: fills the /portal pages from the platform's JSON API.
//
// Built on common.js, like the workspace's app.js: the bearer token from POST /auth/token lives in
// sessionStorage and goes out as `Authorization: Bearer` (no cookie, so nothing can be
// forged from another site); every value from the API is put into the page as text, never
// as HTML. What the client may see is the API's decision; the page adds one more guard:
// a message marked internal is never rendered, whatever the server sent. "What changed
// since your last visit" is kept per conversation in localStorage.
"use strict";

(() => {
  const {
    $, el, sleep, newKey, timeFormat, fieldError, askText, pill, announce, showMessage,
    token, forget, toLogin, ApiError, call, liveUpdates, start,
  } = humanworkPage({
    prefix: "/portal", home: "/portal/conversations", keyPrefix: "portal-", signIn: "sign in",
    markFields: false,
  });
  const VISIT = "humanwork.portal.visit.";
  const POLL_MS = 5000;

  // --- small helpers -------------------------------------------------------------------

  function when(iso) {
    return iso ? el("time", { datetime: iso, class: "when", text: timeFormat.format(new Date(iso)) }) : "";
  }

  function risk(level) {
    return level ? el("span", { class: `risk risk-${level}`, text: `${level} risk` }) : "";
  }

  function toast(text) {
    const close = el("button", { type: "button", "aria-label": "Dismiss notification" }, "×");
    const node = el("div", { class: "toast" }, el("p", { text }), close);
    const remove = () => node.remove();
    close.addEventListener("click", remove);
    $("toasts").append(node);
    setTimeout(remove, 8000);
  }

  // --- the session ---------------------------------------------------------------------

  const EXPLAIN = {
    not_found: "Not found: this does not exist, or it is not yours to see.",
    forbidden: "Your account may not do this.",
    run_state_conflict: "This step is no longer waiting for you.",
    step_hash_mismatch: "The step changed since you opened it; look at it again.",
    human_task_expired: "The deadline of this step passed.",
    confirmation_stale: "The step changed since you saw it (an expert edited it); look at it again.",
    not_initiating_client: "Only the client who started this task confirms its steps.",
    confirmation_refused: "This step no longer waits for your confirmation.",
  };

  function explain(err) {
    return EXPLAIN[err.code] || `${err.message} (${err.code})`;
  }

  const me = { username: "", orgs: [] };

  async function loadMe() {
    const who = await call("GET", "/users/me");
    me.username = who.username;
    me.orgs = who.orgs || [];
    $("user-name").textContent = who.username;
    $("user").hidden = false;
    $("nav").hidden = false;
  }

  function showOrg(orgId) {
    const org = me.orgs.find((o) => o.id === orgId);
    $("user-org").textContent = org ? org.name : "";
  }


  // --- the last visit of each conversation (localStorage) ------------------------------

  function lastVisit(cid) {
    try {
      return JSON.parse(localStorage.getItem(VISIT + cid) || "null");
    } catch (err) {
      return null;
    }
  }

  function saveVisit(cid, visit) {
    localStorage.setItem(VISIT + cid, JSON.stringify(visit));
  }

  // --- the list of conversations -------------------------------------------------------

  function conversationHref(orgId, cid) {
    return `/portal/orgs/${encodeURIComponent(orgId)}/conversations/${encodeURIComponent(cid)}`;
  }

  function conversationItem(orgId, conversation) {
    const visit = lastVisit(conversation.id);
    const fresh = conversation.last_message_at &&
      (!visit || Date.parse(conversation.last_message_at) > Date.parse(visit.at));
    return el("li", { "data-id": conversation.id, class: fresh ? "fresh" : "" },
      el("a", { href: conversationHref(orgId, conversation.id), text: conversation.subject || "(no subject)" }),
      fresh ? pill(visit ? "new since your last visit" : "not opened yet", "pending") : "",
      el("span", { class: "when" }, "Last message ", when(conversation.last_message_at || conversation.created_at)));
  }

  async function listPage() {
    await loadMe();
    $("nav-conversations").setAttribute("aria-current", "page");
    const asked = new URLSearchParams(location.search).get("org");
    const org = me.orgs.find((o) => o.id === asked) || me.orgs[0];
    if (!org) {
      $("list-meta").textContent = "Your account belongs to no organisation.";
      return;
    }
    showOrg(org.id);
    let cursor = null;
    const more = async () => {
      const query = new URLSearchParams({ limit: "25" });
      if (cursor) query.set("cursor", cursor);
      const page = await call("GET", `/orgs/${encodeURIComponent(org.id)}/conversations?${query}`);
      for (const item of page.items) $("conversations").append(conversationItem(org.id, item));
      cursor = page.next_cursor;
      $("more").hidden = !cursor;
      const count = $("conversations").children.length;
      $("conversations-empty").hidden = count > 0;
      $("list-meta").textContent = `${org.name}: ${count} conversation${count === 1 ? "" : "s"}`;
    };
    $("more").addEventListener("click", () => more().catch((err) => showMessage(explain(err))));
    $("new-form").addEventListener("submit", (event) => startConversation(event, org.id));
    await more();
  }

  async function startConversation(event, orgId) {
    event.preventDefault();
    const subject = $("new-subject").value.trim();
    const message = $("new-message").value.trim();
    fieldError($("new-subject"), $("new-error"), subject ? "" : "Give the conversation a subject.");
    if (!subject) {
      $("new-subject").focus();
      return;
    }
    $("new-submit").disabled = true;
    try {
      const body = message ? { subject, message } : { subject };
      const made = await call("POST", `/orgs/${encodeURIComponent(orgId)}/conversations`, body);
      location.assign(conversationHref(orgId, made.id));
    } catch (err) {
      fieldError($("new-subject"), $("new-error"), explain(err));
      $("new-submit").disabled = false;
    }
  }

  // --- one conversation: messages ------------------------------------------------------

  const view = {
    org: "", cid: "", base: "",
    messages: new Map(), // id -> message
    lastId: null, // the newest message id seen
    tasks: new Map(), // name -> ClientTask
    previous: null, // the last visit as stored when the page opened
  };

  const AUTHOR = { client: "Client", expert: "Expert", agent: "Agent", system: "Update" };

  function authorLabel(message) {
    if (message.author_kind === "client" && message.author === me.username) return "You";
    const kind = AUTHOR[message.author_kind] || message.author_kind;
    return message.author && message.author_kind !== "system" ? `${message.author} (${kind})` : kind;
  }

  function messageItem(message, fresh) {
    const meta = message.meta && typeof message.meta === "object" ? message.meta : null;
    return el("li", {
      "data-id": message.id,
      "data-author-kind": message.author_kind,
      class: `msg msg-${message.author_kind}${fresh ? " fresh" : ""}`,
    },
    el("span", { class: "who", text: authorLabel(message) }), " ",
    when(message.created_at),
    fresh ? el("span", { class: "pill pending new-flag", text: "new" }) : "",
    meta && meta.event ? el("span", { class: "event", text: meta.event.replace(/[_.]/g, " ") }) : "",
    el("p", { text: message.content }));
  }

  // Every message goes through here: internal notes are dropped, whatever the server sent.
  function addMessage(message, fresh) {
    if (!message || message.internal === true || view.messages.has(message.id)) return false;
    view.messages.set(message.id, message);
    const list = $("messages");
    const item = messageItem(message, fresh);
    const after = Array.from(list.children).find((li) => Number(li.dataset.id) > Number(message.id));
    list.insertBefore(item, after || null);
    if (view.lastId === null || Number(message.id) > Number(view.lastId)) view.lastId = message.id;
    return true;
  }

  async function fetchMessages() {
    for (;;) {
      const query = new URLSearchParams({ limit: "100" });
      if (view.lastId !== null) query.set("after", String(view.lastId));
      const page = await call("GET", `${view.base}?${query}`);
      renderHead(page.conversation);
      for (const message of page.messages) addMessage(message, isNewMessage(message));
      if (!page.next_after || !page.messages.length) return;
    }
  }

  function renderHead(conversation) {
    $("conversation-title").textContent = conversation.subject || "Conversation";
    $("crumb").textContent = conversation.subject || "Conversation";
    document.title = `${conversation.subject || "Conversation"} · humanwork`;
    $("conversation-meta").textContent = "";
    $("conversation-meta").append("Started ", when(conversation.created_at));
  }

  async function postMessage(event) {
    event.preventDefault();
    const field = $("post-text");
    const content = field.value.trim();
    fieldError(field, $("post-error"), content ? "" : "Write a message first.");
    if (!content) {
      field.focus();
      return;
    }
    $("post-submit").disabled = true;
    try {
      const made = await call("POST", `${view.base}/messages`, { content });
      addMessage(made, false);
      field.value = "";
      announce("Message sent.");
      remember();
    } catch (err) {
      fieldError(field, $("post-error"), explain(err));
    } finally {
      $("post-submit").disabled = false;
      field.focus();
    }
  }

  // --- one conversation: the plan card of each task ------------------------------------

  // the execution's names in both read models of a task (the conversation's and the
  // confirmation's answer)
  const EXECUTION = {
    executed: ["done", "ok"],
    succeeded: ["done", "ok"],
    failed: ["failed", "bad"],
    outcome_unknown: ["being checked by an expert", "warn"],
    outcomeunknown: ["being checked by an expert", "warn"],
    executing: ["in progress", "pending"],
    running: ["in progress", "pending"],
  };

  function stepState(step) {
    const c = step.confirmation;
    if (c && c.state === "declined") return ["declined by you", "bad"];
    const run = EXECUTION[step.execution];
    if (run) return run;
    if (step.decision === "rejected") return ["rejected by the expert", "bad"];
    if (step.decision === "expired") return ["expired", "bad"];
    if (c && c.required && c.state === "waiting") return ["waiting for you", "warn"];
    if (step.decision === "approved") return ["approved", "ok"];
    if (step.decision === "pending") return ["waiting for the expert", "pending"];
    return [step.state || step.decision || "planned", "muted"];
  }

  function stepSignature(step) {
    const c = step.confirmation || {};
    return [step.state, step.decision, step.execution, c.state].join("|");
  }

  function part(label, text) {
    return text ? el("div", { class: "step-part" }, el("strong", { text: label }), el("p", { text })) : "";
  }

  function confirmBox(task, step) {
    const c = step.confirmation;
    if (!c || !c.required) return "";
    if (c.state !== "waiting") {
      const text = c.state === "confirmed" ? "You confirmed this step" : "You declined this step";
      return el("p", { class: "confirmed" }, `${text}`, c.at ? " " : "", when(c.at),
        c.reason ? `: ${c.reason}` : "");
    }
    const label = step.description || step.id;
    return el("div", { class: "confirm-box", role: "group", "aria-label": `Your confirmation of ${label}` },
      el("p", { class: "hint", text: "This step needs your confirmation before it runs." }),
      el("div", { class: "row-actions" },
        el("button", { type: "button", class: "primary confirm", "data-step": step.id,
          "aria-label": `Confirm: ${label}`, onclick: (e) => confirmStep(task, step, e.currentTarget) }, "Confirm"),
        el("button", { type: "button", class: "danger decline", "data-step": step.id, "aria-haspopup": "dialog",
          "aria-label": `Decline: ${label}`, onclick: (e) => declineStep(task, step, e.currentTarget) }, "Decline…")));
  }

  function stepItem(task, step) {
    const [state, kind] = stepState(step);
    const fresh = isChangedStep(task, step);
    return el("li", { "data-step": step.id, "data-state": state, class: fresh ? "fresh" : "" },
      el("div", { class: "step-head" },
        el("span", { class: "step-no", text: String(step.order || "") }),
        el("h4", { text: step.description || step.id }),
        pill(state, kind), risk(step.risk),
        fresh ? el("span", { class: "pill pending new-flag", text: "changed" }) : ""),
      part("What it does", step.summary),
      part("Expert's feedback", step.feedback),
      part("Result", step.result),
      confirmBox(task, step));
  }

  function taskCard(task) {
    return el("article", { class: "plan-card", "data-task": task.name },
      el("div", { class: "step-head" },
        el("h3", { text: task.description || task.name }),
        pill((task.status || task.phase || "").replace(/_/g, " "), "muted")),
      el("ol", { class: "plan" }, (task.steps || []).map((step) => stepItem(task, step))));
  }

  function renderTasks() {
    const box = $("plans");
    const focused = document.activeElement;
    const refocus = focused && focused.dataset && focused.dataset.step
      ? `${focused.closest("[data-task]")?.dataset.task}/${focused.dataset.step}/${focused.className}` : null;
    box.replaceChildren(...Array.from(view.tasks.values()).map(taskCard));
    $("plans-empty").hidden = view.tasks.size > 0;
    if (refocus) {
      const [name, step, cls] = refocus.split("/");
      const again = box.querySelector(`[data-task="${CSS.escape(name)}"] button[data-step="${CSS.escape(step)}"].${cls.split(" ").pop()}`);
      if (again) again.focus();
    }
  }

  async function fetchTasks() {
    const page = await call("GET", `/orgs/${encodeURIComponent(view.org)}/conversations/${encodeURIComponent(view.cid)}/tasks`);
    view.tasks = new Map(page.items.map((task) => [task.name, task]));
    renderTasks();
  }

  function upsertTask(task) {
    if (!task || !task.name) return false;
    view.tasks.set(task.name, task);
    renderTasks();
    return true;
  }

  function stepPath(task, step) {
    return `/orgs/${encodeURIComponent(view.org)}/tasks/${encodeURIComponent(task.name)}` +
      `/steps/${encodeURIComponent(step.id)}`;
  }

  async function confirmStep(task, step, button) {
    button.disabled = true;
    try {
      const body = { step_hash: step.confirmation.step_hash };  // this very version of the step
      upsertTask(await call("POST", `${stepPath(task, step)}/confirm`, body, newKey()));
      announce(`Confirmed: ${step.description || step.id}.`);
      toast(`Confirmed: ${step.description || step.id}`);
    } catch (err) {
      showMessage(`Could not confirm "${step.description || step.id}": ${explain(err)}`);
      await fetchTasks();
    }
    remember();
  }

  // The accessible decline dialog; resolves to the reason, or null when cancelled.
  function askReason(what, opener) {
    return askText("decline", "decline-reason", what, "A reason is required to decline.", opener,
      () => $("plans-title"));
  }

  async function declineStep(task, step, button) {
    const what = `${step.description || step.id}${step.summary ? ": " + step.summary : ""}`;
    const reason = await askReason(what, button);
    if (reason === null) return;
    button.disabled = true;
    try {
      upsertTask(await call("POST", `${stepPath(task, step)}/decline`, { reason }, newKey()));
      announce(`Declined: ${step.description || step.id}.`);
    } catch (err) {
      showMessage(`Could not decline "${step.description || step.id}": ${explain(err)}`);
      await fetchTasks();
    }
    remember();
  }

  // --- what changed since the last visit -----------------------------------------------

  function isNewMessage(message) {
    const before = view.previous;
    return Boolean(before) && before.lastId !== null && Number(message.id) > Number(before.lastId);
  }

  function isChangedStep(task, step) {
    const before = view.previous;
    if (!before) return false;
    const seen = before.steps[`${task.name}/${step.id}`];
    return seen !== stepSignature(step);
  }

  function currentVisit() {
    const steps = {};
    for (const task of view.tasks.values()) {
      for (const step of task.steps || []) steps[`${task.name}/${step.id}`] = stepSignature(step);
    }
    return { at: new Date().toISOString(), lastId: view.lastId, steps };
  }

  function remember() {
    saveVisit(view.cid, currentVisit());
  }

  function showChanges() {
    if (!view.previous) return;
    const items = [];
    const fresh = Array.from(view.messages.values()).filter(isNewMessage);
    if (fresh.length) {
      items.push(`${fresh.length} new message${fresh.length === 1 ? "" : "s"}`);
    }
    for (const task of view.tasks.values()) {
      for (const step of task.steps || []) {
        if (isChangedStep(task, step)) {
          items.push(`${step.description || step.id}: ${stepState(step)[0]}`);
        }
      }
    }
    const text = items.length ? items : ["Nothing changed since your last visit."];
    $("changes-list").replaceChildren(...text.map((line) => el("li", { text: line })));
    $("changes").hidden = false;
    $("changes").dataset.count = String(items.length);
  }

  // --- the live stream of one conversation ---------------------------------------------

  function parsed(data) {
    try {
      return JSON.parse(data);
    } catch (err) {
      return null;
    }
  }

  async function refresh() {
    try {
      await fetchMessages();
      await fetchTasks();
      remember();
    } catch (err) {
      if (err.status !== 401) showMessage(explain(err));
    }
  }

  function onEvent(name, data) {
    const value = parsed(data);
    if (name === "message") {
      if (!(value && value.id !== undefined && addMessage(value, false))) refresh();
      else remember();
    } else if (name === "task") {
      if (!upsertTask(value)) refresh();
      else remember();
    }
  }

  function follow() {
    liveUpdates(`${view.base}/events`, { refresh, onEvent, interval: POLL_MS });
  }

  async function conversationPage() {
    await loadMe();
    const root = $("conversation");
    view.org = root.dataset.org;
    view.cid = root.dataset.conversation;
    view.base = `/orgs/${encodeURIComponent(view.org)}/conversations/${encodeURIComponent(view.cid)}`;
    showOrg(view.org);
    view.previous = lastVisit(view.cid);
    try {
      await fetchMessages();
    } catch (err) {
      if (err.status === 404) {
        $("conversation-title").textContent = "Conversation not found";
        $("conversation-meta").textContent = "";
        showMessage(EXPLAIN.not_found);
        return;
      }
      throw err;
    }
    $("conversation-body").hidden = false;
    await fetchTasks();
    showChanges();
    remember();
    $("post-form").addEventListener("submit", postMessage);
    follow();
  }

  // --- start ---------------------------------------------------------------------------

  start(explain, { portal_list: listPage, portal_conversation: conversationPage });
})();
