/*
 * Stead embed.js — show an end user the live status of their run.
 *
 *   <div id="refund-status"></div>
 *   <script src="https://stead.example.com/embed.js"></script>
 *   <script>
 *     Stead.status({
 *       element: document.getElementById("refund-status"),
 *       baseUrl: "https://stead.example.com",
 *       runId: "run_…",
 *       token: "stc_…", // a customer token from your backend (POST /v1/customer-tokens)
 *     });
 *   </script>
 *
 * The token is sent in the Authorization header only, never in a URL. The
 * status follows the run live (Server-Sent Events read with fetch) until it
 * ends. Everything from the API is rendered as text. It adds
 * BASE/embed.css to the page unless `styles: false`; every element has a
 * `stead-status…` class to style it your own way.
 *
 * A tool's customer-facing label (stead.json "label") names the action
 * ("Waiting for approval of Refund"); the project's accent colour
 * (branding.accentColor) is --stead-accent on the box.
 *
 * Stead.events() is the stream reader underneath, for your own UI.
 */
(function (global) {
  "use strict";

  var TERMINAL = { succeeded: true, failed: true, cancelled: true };
  var TERMINAL_EVENTS = { "run.succeeded": true, "run.failed": true, "run.cancelled": true };

  function trimBase(baseUrl) {
    return String(baseUrl || "").replace(/\/+$/, "");
  }

  // resolveToken accepts a token string or a function returning one (or a
  // promise of one), so a page can fetch a fresh token when one expires.
  function resolveToken(token, fresh) {
    if (typeof token === "function") return Promise.resolve(token(fresh));
    return Promise.resolve(token);
  }

  function sleep(ms, signal) {
    return new Promise(function (resolve) {
      var t = setTimeout(resolve, ms);
      if (signal) signal.addEventListener("abort", function () { clearTimeout(t); resolve(); }, { once: true });
    });
  }

  // ApiError is a refusal from the API in its own words: status, code,
  // message, details.
  function ApiError(status, body) {
    var e = (body && body.error) || {};
    this.name = "SteadApiError";
    this.status = status;
    this.code = e.code || (status ? "http_" + status : "network");
    this.message = e.message || (status ? "HTTP " + status : "network error");
    this.details = e.details || null;
  }
  ApiError.prototype = Object.create(Error.prototype);
  ApiError.prototype.constructor = ApiError;

  async function errorOf(res) {
    var body = null;
    try { body = await res.json(); } catch (_) { /* not JSON */ }
    return new ApiError(res.status, body);
  }

  async function getJSON(url, token, signal) {
    var res;
    try {
      res = await fetch(url, {
        headers: { Authorization: "Bearer " + token, Accept: "application/json" },
        cache: "no-store", signal: signal,
      });
    } catch (err) {
      if (signal && signal.aborted) throw err;
      throw new ApiError(0, { error: { code: "network", message: "cannot reach Stead: " + err.message } });
    }
    if (!res.ok) throw await errorOf(res);
    return res.json();
  }

  // parseStream reads an SSE body and calls onMessage({id, event, data})
  // for each message; it returns the last "retry:" value (ms) or 0.
  async function parseStream(body, onMessage) {
    var reader = body.pipeThrough(new TextDecoderStream()).getReader();
    var buf = "", data = [], id = null, type = "", retry = 0;
    for (;;) {
      var chunk = await reader.read();
      if (chunk.done) break;
      buf += chunk.value;
      var lines = buf.split(/\r\n|\r|\n/);
      buf = lines.pop();
      for (var i = 0; i < lines.length; i++) {
        var line = lines[i];
        if (line === "") {
          if (data.length) onMessage({ id: id, event: type || "message", data: data.join("\n") });
          data = []; type = "";
          continue;
        }
        if (line.charAt(0) === ":") continue;
        var c = line.indexOf(":");
        var field = c < 0 ? line : line.slice(0, c);
        var value = c < 0 ? "" : line.slice(c + 1).replace(/^ /, "");
        if (field === "data") data.push(value);
        else if (field === "event") type = value;
        else if (field === "id") id = value;
        else if (field === "retry" && /^\d+$/.test(value)) retry = Number(value);
      }
    }
    return retry;
  }

  /**
   * Stead.events streams a run's trace events: GET /v1/runs/{id}/events as
   * Server-Sent Events, read with fetch so the credential travels in the
   * Authorization header. It reconnects after a dropped connection from the
   * last event seen, and resolves once the run has ended and every event
   * was delivered. A refusal (401, 403, 404) rejects with the API's error.
   *
   * options: baseUrl ("" for this origin), runId, token (string or
   * function), after (sequence number to start after; 0), onEvent(event),
   * onOpen(), signal (an AbortSignal to stop).
   */
  async function events(options) {
    var base = trimBase(options.baseUrl);
    var runId = options.runId;
    var after = options.after || 0;
    var signal = options.signal;
    var delay = 1000, ended = false, fresh = false;
    while (!(signal && signal.aborted)) {
      var token = await resolveToken(options.token, fresh);
      var url = base + "/v1/runs/" + encodeURIComponent(runId) + "/events?after=" + after;
      var res = null, retry = 0;
      try {
        res = await fetch(url, {
          headers: { Authorization: "Bearer " + token, Accept: "text/event-stream" },
          cache: "no-store", signal: signal,
        });
        if (res.status === 401 && typeof options.token === "function" && !fresh) {
          fresh = true;
          continue;
        }
        if (!res.ok) {
          var err = await errorOf(res);
          if (res.status < 500) throw err;
          res = null;
        } else {
          fresh = false;
          delay = 1000;
          if (options.onOpen) options.onOpen();
          retry = await parseStream(res.body, function (m) {
            var ev;
            try { ev = JSON.parse(m.data); } catch (_) { return; }
            if (typeof ev.seq === "number" && ev.seq > after) after = ev.seq;
            if (TERMINAL_EVENTS[ev.type]) ended = true;
            if (options.onEvent) options.onEvent(ev);
          });
          if (ended) return;
          // The server ends a stream when the run has ended (or it shuts
          // down): ask which.
          var run = await getJSON(base + "/v1/runs/" + encodeURIComponent(runId), token, signal);
          if (TERMINAL[run.status]) return;
        }
      } catch (err) {
        if (signal && signal.aborted) return;
        if (err instanceof ApiError && err.status > 0 && err.status < 500) throw err;
      }
      await sleep(retry || delay, signal);
      delay = Math.min(delay * 2, 15000);
    }
  }

  // Words.

  var rtf = typeof Intl !== "undefined" && Intl.RelativeTimeFormat
    ? new Intl.RelativeTimeFormat("en", { numeric: "auto" }) : null;

  function ago(iso, now) {
    var s = Math.round((new Date(iso).getTime() - now) / 1000);
    var abs = Math.abs(s);
    if (!rtf) return abs + " seconds ago";
    if (abs < 45) return s <= 0 ? "just now" : "in a few seconds";
    if (abs < 45 * 60) return rtf.format(Math.round(s / 60), "minute");
    if (abs < 36 * 3600) return rtf.format(Math.round(s / 3600), "hour");
    return rtf.format(Math.round(s / 86400), "day");
  }

  function clock(iso) {
    return new Date(iso).toLocaleTimeString("en", { hour: "2-digit", minute: "2-digit" });
  }

  // describe turns a run (and what the trace said) into plain words:
  // {state, headline, detail}.
  function describe(run, seen, now) {
    var ap = run.approval;
    switch (run.status) {
      case "queued":
        return { state: "queued", headline: "Queued", detail: "It will start in a moment." };
      case "running":
        return { state: "running", headline: "In progress", detail: "Working on it…" };
      case "awaiting-approval":
        if (!ap) return { state: "awaiting-approval", headline: "Waiting for approval", detail: "A person reviews this action before it happens." };
        return {
          state: "awaiting-approval",
          headline: "Waiting for approval of " + (ap.label || ap.tool) + " — requested " + ago(ap.requestedAt, now),
          detail: "A person reviews this action before it happens. If nobody decides by " + clock(ap.expiresAt) + ", it expires.",
        };
      case "succeeded":
        return { state: "succeeded", headline: "Done", detail: run.finishedAt ? "Finished at " + clock(run.finishedAt) + "." : "" };
      case "cancelled":
        return { state: "cancelled", headline: "Cancelled", detail: "This was stopped before it finished." };
      case "failed":
        var code = run.error && run.error.code;
        if (code === "approval-denied") {
          return {
            state: "declined",
            headline: seen.denialNote ? "Declined: " + seen.denialNote : "Declined",
            detail: "A reviewer declined this action, so it did not happen.",
          };
        }
        if (code === "approval-expired") {
          return { state: "expired", headline: "Expired: nobody decided in time", detail: "The action did not happen." };
        }
        return {
          state: "failed", headline: "Failed",
          detail: (run.error && run.error.message) || "Something went wrong; the action may not have happened.",
        };
    }
    return { state: run.status, headline: run.status, detail: "" };
  }

  function el(tag, cls, text) {
    var e = document.createElement(tag);
    e.className = cls;
    if (text) e.textContent = text;
    return e;
  }

  function addStyles(base) {
    var href = base + "/embed.css";
    var links = document.querySelectorAll("link[rel=stylesheet]");
    for (var i = 0; i < links.length; i++) {
      if (links[i].getAttribute("href") === href || links[i].href === new URL(href, location.href).href) return;
    }
    var link = document.createElement("link");
    link.rel = "stylesheet";
    link.href = href;
    document.head.appendChild(link);
  }

  /**
   * Stead.status renders a run's status into options.element and keeps it
   * live until the run ends. It returns {stop()}.
   *
   * options: element, runId, token (customer token, or a function returning
   * one), baseUrl (where Stead runs; "" for this origin), styles (false to
   * skip embed.css), onChange({state, headline, detail, run}).
   */
  function status(options) {
    var root = options.element;
    if (!root || !root.appendChild) throw new TypeError("Stead.status: options.element must be a DOM element");
    var base = trimBase(options.baseUrl);
    if (options.styles !== false) addStyles(base);
    var ctrl = new AbortController();
    var box = el("div", "stead-status");
    box.setAttribute("role", "status");
    box.setAttribute("aria-live", "polite");
    var headline = el("p", "stead-status__headline", "Loading status…");
    var detail = el("p", "stead-status__detail");
    box.appendChild(headline);
    box.appendChild(detail);
    root.replaceChildren(box);

    var run = null, seen = { denialNote: "" }, timer = null, fetching = null, again = false;

    // accent: the project's accent colour (stead.json branding), checked
    // at deploy and again here; set through the CSSOM, as the strict CSP
    // of Stead's own status page allows.
    function accent(r) {
      var c = r && r.branding && r.branding.accentColor;
      if (c && /^#[0-9a-fA-F]{6}$/.test(c)) {
        box.style.setProperty("--stead-accent", c);
        box.classList.add("stead-status--accent");
      }
    }

    function show(d) {
      accent(run);
      box.setAttribute("data-state", d.state);
      root.setAttribute("data-stead-status", d.state);
      headline.textContent = d.headline;
      detail.textContent = d.detail || "";
      detail.hidden = !d.detail;
      if (options.onChange) options.onChange({ state: d.state, headline: d.headline, detail: d.detail, run: run });
    }

    function showError(err) {
      var d;
      if (err.status === 404) d = { state: "not-found", headline: "Not found", detail: "There is no such run, or this link is not for it." };
      else if (err.status === 401) d = { state: "unauthenticated", headline: "This link is no longer valid", detail: err.message };
      else d = { state: "error", headline: "The status is unavailable", detail: err.message };
      show(d);
    }

    function render() {
      if (run) show(describe(run, seen, Date.now()));
    }

    // refresh reads the run; calls while one is in flight coalesce into one more.
    function refresh() {
      if (fetching) { again = true; return fetching; }
      fetching = resolveToken(options.token, false)
        .then(function (token) { return getJSON(base + "/v1/runs/" + encodeURIComponent(options.runId), token, ctrl.signal); })
        .then(function (r) { run = r; render(); })
        .finally(function () {
          fetching = null;
          if (again && !ctrl.signal.aborted) { again = false; refresh().catch(function () {}); }
        });
      return fetching;
    }

    async function start() {
      if (!options.token) {
        show({ state: "unauthenticated", headline: "This link is incomplete", detail: "It has no access token; ask for a new link." });
        return;
      }
      try {
        await refresh();
        timer = setInterval(render, 15000);
        await events({
          baseUrl: base, runId: options.runId, token: options.token, signal: ctrl.signal,
          onEvent: function (ev) {
            if (ev.type === "approval.denied" && ev.data) seen.denialNote = ev.data.note || "";
            refresh().catch(function () {});
          },
        });
        await refresh();
      } catch (err) {
        if (ctrl.signal.aborted) return;
        showError(err);
      } finally {
        if (timer) clearInterval(timer);
        timer = null;
      }
    }

    start();
    return {
      stop: function () {
        ctrl.abort();
        if (timer) clearInterval(timer);
      },
    };
  }

  var Stead = global.Stead || {};
  Stead.status = status;
  Stead.events = events;
  Stead.ApiError = ApiError;
  global.Stead = Stead;
})(typeof window !== "undefined" ? window : globalThis);
