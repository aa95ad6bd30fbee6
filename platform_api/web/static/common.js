// What the expert workspace (app.js) and the client portal (portal.js) share: the DOM
// helpers, the session, the JSON API call, the sign-in page and the live updates from an
// event stream. Loaded before either; `humanworkPage(area)` answers the helpers bound to one area
// (its path prefix, home page, sign-in words and idempotency-key prefix).
//
// The bearer token from POST /auth/token is kept in sessionStorage (per tab, gone with it)
// and sent as `Authorization: Bearer`; no cookie carries credentials, so requests cannot be
// forged from another site. Every value from the API is put into the page as text (never as
// HTML).
"use strict";

function humanworkPage(area) {
  const TOKEN = "humanwork.token";
  const EXPIRES = "humanwork.expires";
  const STREAM_RETRY_MS = 5000;

  // --- small helpers -------------------------------------------------------------------

  const $ = (id) => document.getElementById(id);

  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs || {})) {
      if (value === null || value === undefined || value === false) continue;
      if (key === "class") node.className = value;
      else if (key === "text") node.textContent = value;
      else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
      else if (value === true) node.setAttribute(key, "");
      else node.setAttribute(key, String(value));
    }
    for (const child of children.flat()) {
      if (child === null || child === undefined || child === false) continue;
      node.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return node;
  }

  const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

  // one per user action, so that a retry after a network failure cannot act twice
  function newKey() {
    const bytes = new Uint8Array(16);
    crypto.getRandomValues(bytes);
    return area.keyPrefix + Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
  }

  const timeFormat = new Intl.DateTimeFormat(undefined, {
    month: "short", day: "numeric", hour: "2-digit", minute: "2-digit",
  });

  function invalid(field, on) {
    if (on) field.setAttribute("aria-invalid", "true");
    else field.removeAttribute("aria-invalid");
  }

  // `text` in the error box of `field` and the field marked invalid; "" clears both
  function fieldError(field, box, text) {
    box.textContent = text;
    box.hidden = !text;
    invalid(field, Boolean(text));
  }

  // The accessible dialog `<name>-dialog` asking for the text `field` (its form, `what`
  // and `cancel` named alike); resolves to the text, or null when cancelled. Empty is
  // refused with `required`. The focus goes back to `opener`, or to `fallback()` when it
  // is gone or disabled.
  function askText(name, field, what, required, opener, fallback) {
    const dialog = $(`${name}-dialog`);
    const form = $(`${name}-form`);
    const input = $(field);
    const error = $(`${name}-error`);
    const cancelButton = $(`${name}-cancel`);
    $(`${name}-what`).textContent = what;
    input.value = "";
    fieldError(input, error, "");
    return new Promise((resolve) => {
      let answer = null;
      const submit = (event) => {
        event.preventDefault();
        const value = input.value.trim();
        if (!value) {
          fieldError(input, error, required);
          input.focus();
          return;
        }
        answer = value;
        dialog.close();
      };
      const cancel = () => dialog.close();
      const closed = () => {
        form.removeEventListener("submit", submit);
        cancelButton.removeEventListener("click", cancel);
        dialog.removeEventListener("close", closed);
        if (opener && opener.isConnected && !opener.disabled) opener.focus();
        else fallback().focus();
        resolve(answer);
      };
      form.addEventListener("submit", submit);
      cancelButton.addEventListener("click", cancel);
      dialog.addEventListener("close", closed);
      dialog.showModal();
      input.focus();
    });
  }

  function pill(text, kind) {
    return el("span", { class: `pill ${kind}`, text });
  }

  function announce(text) {
    const region = $("announcer");
    region.textContent = "";
    setTimeout(() => {
      region.textContent = text;
    }, 50);
  }

  function showMessage(text) {
    const box = $("message");
    if (!box) return;
    box.textContent = text;
    box.hidden = !text;
  }

  // --- the session ---------------------------------------------------------------------

  function token() {
    const value = sessionStorage.getItem(TOKEN);
    const expires = sessionStorage.getItem(EXPIRES);
    if (!value) return null;
    if (expires && Date.parse(expires) <= Date.now()) {
      forget();
      return null;
    }
    return value;
  }

  function forget() {
    sessionStorage.removeItem(TOKEN);
    sessionStorage.removeItem(EXPIRES);
  }

  function toLogin(reason) {
    const query = new URLSearchParams({ next: location.pathname + location.search });
    if (reason) query.set("reason", reason);
    location.replace(`${area.prefix}/login?${query}`);
  }

  // only a page of this area, never another site's address
  function safeNext(raw) {
    if (raw && raw.startsWith(`${area.prefix}/`) && !raw.startsWith("//") && !raw.includes("\\")) {
      return raw;
    }
    return area.home;
  }

  class ApiError extends Error {
    constructor(status, code, message, details) {
      super(message);
      this.status = status;
      this.code = code;
      this.details = details || {};
    }
  }

  async function send(method, path, headers, body) {
    for (let attempt = 0; ; attempt += 1) {
      try {
        return await fetch(path, {
          method, headers, credentials: "omit", cache: "no-store",
          body: body === undefined ? undefined : JSON.stringify(body),
        });
      } catch (err) {
        if (attempt >= 2 || (method !== "GET" && !headers["Idempotency-Key"])) {
          throw new ApiError(0, "network_error", "The platform cannot be reached; try again.");
        }
        await sleep(400 * (attempt + 1));
      }
    }
  }

  // One call of the JSON API. A network failure is retried (twice) for reads and for
  // requests that carry an Idempotency-Key, which makes the retry safe.
  async function call(method, path, body, key) {
    const headers = { Accept: "application/json" };
    const bearer = token();
    if (bearer) headers.Authorization = `Bearer ${bearer}`;
    if (body !== undefined) headers["Content-Type"] = "application/json";
    if (key) headers["Idempotency-Key"] = key;
    const response = await send(method, path, headers, body);
    const text = await response.text();
    let data = null;
    try {
      data = text ? JSON.parse(text) : null;
    } catch (err) {
      data = null;
    }
    if (!response.ok) {
      const code = (data && data.code) || `http_${response.status}`;
      const message = (data && data.message) || response.statusText || "request failed";
      if (response.status === 401 && path !== "/auth/token") {
        forget();
        toLogin("expired");
      }
      throw new ApiError(response.status, code, message, data && data.details);
    }
    return data;
  }

  // --- the sign-in page ----------------------------------------------------------------

  function loginPage(explain) {
    const params = new URLSearchParams(location.search);
    const next = safeNext(params.get("next"));
    if (token()) {
      location.replace(next);
      return;
    }
    const error = $("login-error");
    if (params.get("reason") === "expired") {
      error.textContent = `Your session ended; please ${area.signIn} again.`;
      error.hidden = false;
    }
    $("username").focus();
    $("login-form").addEventListener("submit", async (event) => {
      event.preventDefault();
      const username = $("username").value.trim();
      const password = $("password").value;
      if (area.markFields) {
        for (const [field, value] of [["username", username], ["password", password]]) {
          invalid($(field), !value);
        }
      }
      if (!username || !password) {
        error.textContent = "Enter your username and password.";
        error.hidden = false;
        $(username ? "password" : "username").focus();
        return;
      }
      $("login-submit").disabled = true;
      try {
        const issued = await call("POST", "/auth/token", { username, password });
        sessionStorage.setItem(TOKEN, issued.access_token);
        sessionStorage.setItem(EXPIRES, issued.expires_at);
        location.replace(next);
      } catch (err) {
        error.textContent = err.status === 401 ? "Wrong username or password." : explain(err);
        error.hidden = false;
        $("password").value = "";
        $("password").focus();
      } finally {
        $("login-submit").disabled = false;
      }
    });
  }

  // --- an event stream (EventSource cannot send the bearer token: read with fetch) -----

  // `live` (optional) keeps the last event id, sent back as Last-Event-ID on a reconnect
  function parseEvent(block, onEvent, live) {
    let id = "";
    let name = "";
    const data = [];
    for (const line of block.split("\n")) {
      if (line.startsWith(":")) continue;
      const at = line.indexOf(":");
      const field = at < 0 ? line : line.slice(0, at);
      const value = at < 0 ? "" : line.slice(at + 1).replace(/^ /, "");
      if (field === "id") id = value;
      else if (field === "event") name = value;
      else if (field === "data") data.push(value);
    }
    if (id && live) live.lastId = id;
    if (name || data.length) onEvent(name || "message", data.join("\n"));
  }

  async function readStream(url, onOpen, onEvent, live) {
    const headers = { Accept: "text/event-stream" };
    const bearer = token();
    if (bearer) headers.Authorization = `Bearer ${bearer}`;
    if (live && live.lastId) headers["Last-Event-ID"] = live.lastId;
    const response = await fetch(url, { headers, credentials: "omit", cache: "no-store" });
    if (!response.ok || !response.body) throw new Error(`event stream: ${response.status}`);
    onOpen();
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) throw new Error("event stream closed");
      buffer += decoder.decode(value, { stream: true }).replace(/\r\n?/g, "\n");
      let cut;
      while ((cut = buffer.indexOf("\n\n")) >= 0) {
        parseEvent(buffer.slice(0, cut), onEvent, live);
        buffer = buffer.slice(cut + 2);
      }
    }
  }

  // Keep a page up to date: `refresh` once the event stream `url` opens and `onEvent`
  // for each of its events (`cursor` keeps the last event id for a reconnect); while it is
  // down, `refresh` every `interval` ms and the stream tried again every STREAM_RETRY_MS.
  // Only the polling without `stream` or a browser that cannot read one; `data-live` on
  // the body says which.
  function liveUpdates(url, { refresh, onEvent, interval, cursor, stream = true }) {
    let timer = null;
    const poll = () => {
      clearTimeout(timer);
      timer = setTimeout(async function tick() {
        await refresh();
        timer = setTimeout(tick, interval);
      }, interval);
    };
    const connect = () => {
      readStream(url, () => {
        document.body.dataset.live = "stream";
        clearTimeout(timer);
        refresh();
      }, onEvent, cursor).catch(() => {
        document.body.dataset.live = "polling";
        poll();
        setTimeout(connect, STREAM_RETRY_MS);
      });
    };
    if (stream && window.ReadableStream && window.TextDecoder) connect();
    else {
      document.body.dataset.live = "polling";
      poll();
    }
  }

  // --- the entry of every page --------------------------------------------------------

  // the sign-in page signs in; any other page needs a session and runs `pages[its name]`
  function start(explain, pages) {
    const run = async () => {
      const page = document.body.dataset.page;
      if (page === "login") {
        loginPage(explain);
        return;
      }
      if (!token()) {
        toLogin();
        return;
      }
      $("logout").addEventListener("click", () => {
        forget();
        location.replace(`${area.prefix}/login`);
      });
      try {
        if (pages[page]) await pages[page]();
      } catch (err) {
        if (err.status !== 401) showMessage(explain(err));
      }
    };
    if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", run);
    else run();
  }

  return {
    $, el, sleep, newKey, timeFormat, invalid, fieldError, askText, pill, announce,
    showMessage, token, forget, toLogin, ApiError, call, liveUpdates, start,
  };
}
