// spoold's dashboard: its script (index.html). Every string from the
// server goes into the DOM as text (textContent, append): payloads and
// errors are user data.
"use strict";
const $ = (id) => document.getElementById(id);
const STATUSES = ["pending", "running", "retry_scheduled", "waiting", "held",
                  "succeeded", "failed", "cancelled"];
const PROBLEMS = ["failed", "retry_scheduled", "cancelled"];
const TOKEN_KEY = "spoold.token";
const PAGE = 50;

// Builds an element; strings among the children become text nodes.
function el(tag, props, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(props || {})) {
    if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else if (k === "text") e.textContent = v;
    else e.setAttribute(k, v);
  }
  e.append(...children.map((c) => (c instanceof Node ? c : String(c))));
  return e;
}

function say(text, error) {
  $("message").textContent = text;
  $("message").className = error ? "error" : "";
}

// ---- REST ------------------------------------------------------------------
// The Authorization header, when a token is kept: spoold wants one on
// every read too once it has a token of its own.
function authHeaders() {
  const token = sessionStorage.getItem(TOKEN_KEY);
  return token ? { Authorization: "Bearer " + token } : {};
}

async function api(method, path) {
  const init = { method, cache: "no-store", headers: authHeaders() };
  let res = await fetch(path, init);
  // A read refused for want of a token: ask once, then try again.
  if (res.status === 401 && method === "GET" && (await askToken("read"))) {
    init.headers = authHeaders();
    res = await fetch(path, init);
  }
  let body = null;
  try { body = await res.json(); } catch (_) { /* not JSON */ }
  if (!res.ok) {
    const e = body && body.error;
    const err = new Error(e ? `${res.status} ${e.code}: ${e.message}` : `HTTP ${res.status}`);
    err.status = res.status;
    throw err;
  }
  return body;
}

// ---- the token -------------------------------------------------------------
function showToken() {
  const set = !!sessionStorage.getItem(TOKEN_KEY);
  $("token-state").textContent = set ? "token set" : "no token";
  $("forget-token").hidden = !set;
}
$("forget-token").addEventListener("click", () => { sessionStorage.removeItem(TOKEN_KEY); showToken(); });

// One dialog at a time: every caller that needs the token while it is open
// waits for the same answer.
let asking = null;
function askToken(why) {
  if (asking) return asking;
  const dialog = $("token-dialog");
  $("token-input").value = "";
  if (why === "read") sessionStorage.removeItem(TOKEN_KEY);
  $("token-why").textContent = why === "read"
    ? "spoold needs a token to show anything: the one from server.token_file, or the read-only one from server.read_token_file."
    : "Retry and cancel need the token from server.token_file.";
  asking = new Promise((resolve) => {
    dialog.addEventListener("close", () => {
      const token = $("token-input").value.trim();
      if (dialog.returnValue === "ok" && token) {
        sessionStorage.setItem(TOKEN_KEY, token);
        showToken();
        resolve(true);
      } else {
        resolve(false);
      }
    }, { once: true });
    dialog.returnValue = "";
    dialog.showModal();
  }).finally(() => { asking = null; });
  return asking;
}

async function mutate(id, action) {
  if (!sessionStorage.getItem(TOKEN_KEY) && !(await askToken("write"))) return;
  try {
    const r = await api("POST", `/v1/tasks/${id}/${action}`);
    say(`Task ${id}: ${action} done, now ${r.status}.`);
  } catch (err) {
    // A refused token is forgotten, so that the next click asks again.
    if (err.status === 401 || err.status === 403) { sessionStorage.removeItem(TOKEN_KEY); showToken(); }
    say(`${action} of task ${id} failed: ${err.message}`, true);
  }
  refreshProblems();
  if (detailId === id) refreshDetail();
}

// ---- counts ----------------------------------------------------------------
let problemCounts = "";
function renderCounts(counts) {
  const tiles = $("tiles");
  tiles.replaceChildren(...STATUSES.map((s) =>
    el("li", { "data-status": s }, el("span", { class: "n", text: counts.by_status[s] || 0 }),
       el("span", { class: "name", text: s.replace("_", " ") }))));
  $("types-head").replaceChildren(el("th", { scope: "col", text: "type" }),
    ...STATUSES.map((s) => el("th", { scope: "col", class: "num", text: s.replace("_", " ") })));
  const types = Object.keys(counts.by_type || {}).sort();
  $("types").tBodies[0].replaceChildren(...(types.length ? types.map((t) =>
    el("tr", { "data-type": t }, el("th", { scope: "row", text: t }),
       ...STATUSES.map((s) => el("td", { class: "num", "data-status": s, text: counts.by_type[t][s] || 0 }))))
    : [el("tr", {}, el("td", { colspan: STATUSES.length + 1, class: "muted", text: "no tasks" }))]));
  const key = PROBLEMS.map((s) => counts.by_status[s] || 0).join(",");
  if (key !== problemCounts) { problemCounts = key; refreshProblems(); }
}

// ---- the failed / retrying / cancelled list --------------------------------
let problemsTimer = null;
function refreshProblems() {
  clearTimeout(problemsTimer);
  problemsTimer = setTimeout(loadProblems, 150);
}

async function loadProblems() {
  let lists;
  try {
    lists = await Promise.all(PROBLEMS.map((s) => api("GET", `/v1/tasks?status=${s}&order=newest&payload=false&limit=${PAGE}`)));
  } catch (err) {
    say(`Loading the task list failed: ${err.message}`, true);
    return;
  }
  const tasks = lists.flatMap((l) => l.tasks);
  tasks.sort((a, b) => (b.updated_at < a.updated_at ? -1 : b.updated_at > a.updated_at ? 1 : b.id - a.id));
  $("problems").tBodies[0].replaceChildren(...(tasks.length ? tasks.map(problemRow)
    : [el("tr", {}, el("td", { colspan: 7, class: "muted", text: "none" }))]));
  const more = lists.some((l) => l.next_cursor);
  $("problems-note").textContent = more ? `Showing the newest ${PAGE} of each status.` : "";
}

function problemRow(t) {
  const open = () => openDetail(t.id);
  const action = (name, label, enabled) => el("button", {
    type: "button", "data-action": name, "aria-label": `${label} task ${t.id}`,
    onclick: (e) => { e.stopPropagation(); mutate(t.id, name); },
    ...(enabled ? {} : { disabled: "" }) }, label);
  return el("tr", { "data-id": t.id, "data-status": t.status, onclick: open },
    el("td", {}, el("button", { type: "button", class: "link", "aria-label": `open task ${t.id}`,
                               onclick: (e) => { e.stopPropagation(); open(); } }, `#${t.id}`)),
    el("td", { text: t.type }), el("td", { text: t.status }),
    el("td", { class: "num", text: `${t.attempts}/${t.max_attempts}` }),
    el("td", { text: shortTime(t.updated_at) }),
    el("td", { class: "err", text: t.last_error || "" }),
    el("td", {}, action("retry", "Retry", t.status !== "retry_scheduled"), " ",
       action("cancel", "Cancel", t.status === "retry_scheduled")));
}

function shortTime(rfc3339) {
  const d = new Date(rfc3339);
  return isNaN(d) ? String(rfc3339) : d.toLocaleString();
}

// ---- a task's detail -------------------------------------------------------
let detailId = null;
let detailTimer = null;
function openDetail(id) {
  detailId = id;
  $("detail").hidden = false;
  refreshDetail().then(() => $("detail").scrollIntoView({ block: "nearest" }));
}

async function refreshDetail() {
  const id = detailId;
  if (id === null) return;
  let task, history;
  try {
    [task, history] = await Promise.all([api("GET", `/v1/tasks/${id}`), api("GET", `/v1/tasks/${id}/history`)]);
  } catch (err) {
    $("detail-title").textContent = `Task ${id}`;
    $("history").tBodies[0].replaceChildren();
    $("detail-payload").textContent = "";
    $("detail-json").textContent = err.message;
    return;
  }
  if (id !== detailId) return;
  $("detail-title").textContent = `Task ${id}: ${task.type}, ${task.status}`;
  $("detail").dataset.id = id;
  $("detail").dataset.status = task.status;
  $("history").tBodies[0].replaceChildren(...(history.failures.length ? history.failures.map((f) =>
    el("tr", {}, el("td", { class: "num", text: f.attempt }), el("td", { text: shortTime(f.at) }),
       el("td", { class: "err", text: f.error })))
    : [el("tr", {}, el("td", { colspan: 3, class: "muted", text: "no failures" }))]));
  $("detail-payload").textContent = payloadText(task);
  $("detail-json").textContent = JSON.stringify(task, null, 2);
}

// The payload as text when it is UTF-8, else its size.
function payloadText(task) {
  if (!("payload_base64" in task)) return JSON.stringify(task.payload, null, 2);
  const bytes = Uint8Array.from(atob(task.payload_base64), (c) => c.charCodeAt(0));
  try { return new TextDecoder("utf-8", { fatal: true }).decode(bytes); }
  catch (_) { return `(binary, ${bytes.length} bytes)`; }
}

$("detail-retry").addEventListener("click", () => mutate(detailId, "retry"));
$("detail-cancel").addEventListener("click", () => mutate(detailId, "cancel"));
$("detail-close").addEventListener("click", () => { detailId = null; $("detail").hidden = true; });
$("open-form").addEventListener("submit", (e) => { e.preventDefault(); openDetail(Number($("open-id").value)); });

// ---- throughput ------------------------------------------------------------
const SPAN = 300;  // seconds on the chart
const STEP = 5;    // seconds a point of it
const POINTS = SPAN / STEP;
const SERIES = [["enqueued", "#0b5cad"], ["succeeded", "#1a7f37"], ["failed", "#c2261c"]];
const buckets = new Map();  // second / STEP -> {enqueued, succeeded, failed}

function countEvent(ev) {
  const kind = ev.kind === "retry_scheduled" ? "failed" : ev.kind;
  if (!["enqueued", "succeeded", "failed"].includes(kind)) return;
  // The event's own time (replays after a reconnect land where they
  // happened), unless the clocks disagree; then the time it arrived.
  let ms = Date.parse(ev.at);
  if (!(Math.abs(Date.now() - ms) < SPAN * 1000)) ms = Date.now();
  const slot = Math.floor(ms / 1000 / STEP);
  const b = buckets.get(slot) || { enqueued: 0, succeeded: 0, failed: 0 };
  b[kind]++;
  buckets.set(slot, b);
}

function drawChart() {
  const nowSlot = Math.floor(Date.now() / 1000 / STEP);
  for (const slot of buckets.keys()) if (slot <= nowSlot - POINTS) buckets.delete(slot);
  const canvas = $("chart");
  const dpr = window.devicePixelRatio || 1;
  const w = canvas.clientWidth, h = canvas.clientHeight;
  if (canvas.width !== Math.round(w * dpr)) { canvas.width = Math.round(w * dpr); canvas.height = Math.round(h * dpr); }
  const g = canvas.getContext("2d");
  g.setTransform(dpr, 0, 0, dpr, 0, 0);
  g.clearRect(0, 0, w, h);
  // Per second: each point is STEP seconds' events over STEP.
  let max = 1;
  for (const b of buckets.values()) max = Math.max(max, b.enqueued / STEP, b.succeeded / STEP, b.failed / STEP);
  const left = 44, right = 12, top = 10, bottom = 20;
  const x = (i) => left + (i / (POINTS - 1)) * (w - left - right);
  const y = (v) => h - bottom - (v / max) * (h - top - bottom);
  g.font = "11px system-ui, sans-serif";
  g.fillStyle = "#5b6670";
  g.strokeStyle = "#e4e8ec";
  g.lineWidth = 1;
  for (const v of [0, max / 2, max]) {
    g.beginPath(); g.moveTo(left, y(v)); g.lineTo(w - right, y(v)); g.stroke();
    g.textAlign = "right"; g.fillText(String(Math.round(v * 10) / 10), left - 6, y(v) + 4);
  }
  for (let m = 5; m >= 0; m--) {
    g.textAlign = m === 5 ? "left" : m === 0 ? "right" : "center";
    g.fillText(m ? `-${m} min` : "now", x((POINTS - 1) * (1 - m / 5)), h - 5);
  }
  for (const [name, color] of SERIES) {
    g.strokeStyle = color; g.lineWidth = 1.5; g.beginPath();
    for (let i = 0; i < POINTS; i++) {
      const b = buckets.get(nowSlot - POINTS + 1 + i);
      const v = b ? b[name] / STEP : 0;
      if (i === 0) g.moveTo(x(i), y(v)); else g.lineTo(x(i), y(v));
    }
    g.stroke();
  }
  // The last 60 s (the 12 latest points, the current partial one included).
  const last = { enqueued: 0, succeeded: 0, failed: 0 };
  for (const [slot, b] of buckets) if (slot > nowSlot - 60 / STEP) for (const k in last) last[k] += b[k];
  const rates = $("rates");
  rates.textContent = `Last 60 s: ${last.enqueued} enqueued, ${last.succeeded} succeeded, ${last.failed} failed attempts.`;
  Object.assign(rates.dataset, last);
}
setInterval(drawChart, 1000);
window.addEventListener("resize", drawChart);

// ---- the event stream ------------------------------------------------------
function setConn(state, text) {
  $("conn").className = state;
  $("conn").textContent = text;
}

async function reloadAll() {
  document.body.dataset.reloads = Number(document.body.dataset.reloads || 0) + 1;
  try { renderCounts(await api("GET", "/v1/counts")); } catch (err) { say(`Loading counts failed: ${err.message}`, true); }
  refreshProblems();
  if (detailId !== null) refreshDetail();
}

// The stream is read with fetch, not EventSource, which cannot send an
// Authorization header. Like EventSource it resumes with Last-Event-ID
// after a dropped connection; a refused one starts afresh and reloads.
let lastEventId = null;
function onEvent(type, data) {
  if (type === "counts") renderCounts(JSON.parse(data));
  else if (type === "task") {
    const ev = JSON.parse(data);
    countEvent(ev);
    if (ev.id === detailId) { clearTimeout(detailTimer); detailTimer = setTimeout(refreshDetail, 150); }
  } else if (type === "reset") {
    say(`The event stream restarted (${JSON.parse(data).reason}); state reloaded.`);
    reloadAll();
  }
}

// Feeds the text of `reader` (a stream of strings) through the SSE
// grammar, calling onEvent for each complete event.
async function readEvents(reader) {
  let buffer = "";
  let type = "message", data = [], id = null;
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += value;
    let nl;
    while ((nl = buffer.indexOf("\n")) >= 0) {
      let line = buffer.slice(0, nl);
      buffer = buffer.slice(nl + 1);
      if (line.endsWith("\r")) line = line.slice(0, -1);
      if (line === "") {
        if (id !== null) lastEventId = id;
        if (data.length) onEvent(type, data.join("\n"));
        type = "message"; data = []; id = null;
        continue;
      }
      if (line.startsWith(":")) continue;
      const colon = line.indexOf(":");
      const field = colon < 0 ? line : line.slice(0, colon);
      let text = colon < 0 ? "" : line.slice(colon + 1);
      if (text.startsWith(" ")) text = text.slice(1);
      if (field === "event") type = text;
      else if (field === "data") data.push(text);
      else if (field === "id") id = text;
    }
  }
}

async function connect() {
  setConn("", "connecting…");
  const headers = authHeaders();
  if (lastEventId !== null) headers["Last-Event-ID"] = lastEventId;
  let res;
  try {
    res = await fetch("/v1/events", { headers, cache: "no-store" });
  } catch (_) {
    // spoold unreachable: try again, resuming where the stream was.
    setConn("down", "reconnecting…");
    setTimeout(connect, 1000);
    return;
  }
  if (res.status === 401) {
    if (await askToken("read")) return connect();
    setConn("down", "no token: nothing to show");
    return;
  }
  if (!res.ok) {
    // Refused (e.g. 503 while spoold starts): a new stream, which cannot
    // resume: reload everything.
    setConn("down", "disconnected, retrying");
    lastEventId = null;
    setTimeout(() => { connect(); reloadAll(); }, 2000);
    return;
  }
  setConn("live", "live");
  try {
    await readEvents(res.body.pipeThrough(new TextDecoderStream()).getReader());
  } catch (_) { /* the connection dropped */ }
  setConn("down", "reconnecting…");
  setTimeout(connect, 1000);
}

showToken();
drawChart();
connect();
