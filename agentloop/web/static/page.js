// The page of `agentloop web`: it renders the run's events (as agentloop.serialization
// writes them) and sends back the user's decisions. It has no rule of its own.
"use strict";

const token = new URLSearchParams(location.search).get("token") || "";
const byId = (id) => document.getElementById(id);
const chat = byId("chat");
const timeline = byId("timeline");

let running = false;
let calls = new Map(); // "<loop>/<call id>" -> the call's card, bar and times
let childParent = new Map(); // a sub-agent's loop id -> the key of the call that runs it
let assistant = null; // the assistant message streaming in (main loop)
let runStart = null; // `at` of the run's AgentStart (the timeline's zero)
let lastAt = 0;
let currentSession = null;

function el(tag, cls, text) {
  const node = document.createElement(tag);
  if (cls) node.className = cls;
  if (text !== undefined) node.textContent = text;
  return node;
}

function scrolled(fn) {
  const atEnd = chat.scrollHeight - chat.scrollTop - chat.clientHeight < 40;
  fn();
  if (atEnd) chat.scrollTop = chat.scrollHeight;
}

function texts(content) {
  return (content || []).filter((b) => b.type === "text").map((b) => b.text).join("");
}

async function post(path, data) {
  const response = await fetch(path, {
    method: "POST",
    headers: { "Content-Type": "application/json", "X-Agentloop-Token": token },
    body: JSON.stringify(data || {}),
  });
  const answer = await response.json();
  if (!answer.ok) note("Not done: " + answer.error, "error");
  return answer;
}

function note(text, kind) {
  scrolled(() => chat.append(el("div", "msg note" + (kind ? " " + kind : ""), text)));
}

function setRunning(value) {
  running = value;
  const status = byId("status");
  status.dataset.running = String(value);
  status.textContent = value ? "running" : "idle";
  byId("abort").disabled = !value;
  byId("new").disabled = value;
  byId("send").textContent = value ? "Steer" : "Send";
}

function showState(state) {
  byId("model").textContent = "model: " + state.model;
  byId("directory").textContent = state.directory;
  currentSession = state.session_id;
  byId("session").textContent = state.session_id ? "session " + state.session_id : "new session";
}

// ------------------------------------------------------------------ tool calls

function callOf(loop, id, name) {
  const key = loop + "/" + id;
  let call = calls.get(key);
  if (call) return call;
  const card = el("div", "tool");
  card.dataset.callId = id;
  card.dataset.loop = loop;
  card.dataset.state = "running";
  const head = el("div");
  head.append(el("span", "name", name), el("span", "dim", "  " + id));
  card.append(head, el("pre", "args"), el("pre", "progress"), el("pre", "result"), el("div", "children"));
  const row = el("div", "row");
  row.setAttribute("role", "listitem");
  const label = el("span", "label", name);
  const track = el("div", "track");
  const bar = el("div", "bar");
  bar.dataset.callId = id;
  bar.dataset.tool = name;
  bar.dataset.loop = loop;
  bar.dataset.state = "running";
  bar.title = name;
  track.append(bar);
  row.append(label, track);
  call = { key, id, name, card, row, bar, track, queuedAt: null, dequeuedAt: null, askedAt: null, start: null, end: null };
  const parentKey = childParent.get(loop);
  const parent = parentKey && calls.get(parentKey);
  if (parent) {
    row.classList.add("child");
    bar.dataset.parent = parent.id;
    parent.card.querySelector(".children").append(card);
    let after = parent.row;
    while (after.nextSibling && after.nextSibling.classList.contains("child")
           && after.nextSibling.dataset.parentKey === parent.key) after = after.nextSibling;
    row.dataset.parentKey = parent.key;
    after.after(row);
  } else {
    scrolled(() => chat.append(card));
    timeline.append(row);
  }
  calls.set(key, call);
  assistant = null;
  return call;
}

function setCallState(call, value) {
  call.card.dataset.state = value;
  call.bar.dataset.state = value;
}

function ask(call, reason) {
  setCallState(call, "waiting");
  call.card.querySelector(".ask")?.remove();
  const box = el("div", "ask");
  const approve = el("button", "approve", "Approve");
  const deny = el("button", "deny", "Deny");
  approve.type = deny.type = "button";
  approve.dataset.callId = deny.dataset.callId = call.id;
  approve.onclick = () => decide(call, true, box);
  deny.onclick = () => decide(call, false, box);
  box.append(el("span", "dim", reason), approve, deny);
  call.card.append(box);
  call.card.scrollIntoView({ block: "nearest" });
}

async function decide(call, approved, box) {
  for (const button of box.querySelectorAll("button")) button.disabled = true;
  await post("/api/decide", { tool_call_id: call.id, approved });
}

// ------------------------------------------------------------------ the timeline

let layoutQueued = false;
function layout() {
  if (layoutQueued) return;
  layoutQueued = true;
  requestAnimationFrame(() => {
    layoutQueued = false;
    if (runStart === null) return;
    let last = runStart;
    for (const call of calls.values()) last = Math.max(last, call.end ?? lastAt, call.start ?? 0);
    const span = Math.max(last - runStart, 1);
    byId("span").textContent = (span / 1000).toFixed(2) + " s";
    const pct = (t) => ((t - runStart) / span) * 100 + "%";
    for (const call of calls.values()) {
      const from = call.queuedAt ?? call.start ?? call.askedAt;
      if (from === null) continue;
      const start = call.start ?? call.dequeuedAt ?? call.askedAt ?? lastAt;
      const end = call.end ?? lastAt;
      call.bar.style.left = pct(start);
      call.bar.style.width = ((Math.max(end - start, 0) / span) * 100) + "%";
      if (call.queuedAt !== null) {
        let q = call.track.querySelector(".queued");
        if (!q) { q = el("div", "queued"); q.title = "queued"; call.track.prepend(q); }
        const until = call.dequeuedAt ?? call.start ?? lastAt;
        q.style.left = pct(call.queuedAt);
        q.style.width = (((until - call.queuedAt) / span) * 100) + "%";
      }
    }
  });
}

// ------------------------------------------------------------------ events

function handle(event, at) {
  const loop = event.loop_id;
  const main = !childParent.has(loop);
  switch (event.type) {
    case "AgentStart":
      if (event.parent_loop_id === null && main) {
        setRunning(true);
        runStart = at;
        calls = new Map();
        timeline.replaceChildren();
      }
      break;
    case "MessageStart":
      if (!main) break;
      if (event.message.role === "user") {
        scrolled(() => chat.append(el("div", "msg user", texts(event.message.content))));
        assistant = null;
      } else if (event.message.role === "assistant") {
        assistant = el("div", "msg assistant");
        assistant.dataset.deltas = "0";
        scrolled(() => chat.append(assistant));
      }
      break;
    case "MessageUpdate":
      if (main && assistant && event.delta.type === "text") {
        scrolled(() => { assistant.textContent += event.delta.delta; });
        assistant.dataset.deltas = String(Number(assistant.dataset.deltas) + 1);
      }
      break;
    case "MessageEnd":
      if (main && event.message.role === "assistant" && assistant) {
        const text = texts(event.message.content);
        if (text) assistant.textContent = text;
        else assistant.remove();
        assistant = null;
      }
      break;
    case "ToolApprovalRequested": {
      const call = callOf(loop, event.tool_call_id, event.tool_name);
      call.card.querySelector(".args").textContent = JSON.stringify(event.args, null, 1);
      call.askedAt = at;
      ask(call, event.reason);
      break;
    }
    case "ToolApprovalDecided": {
      const call = callOf(loop, event.tool_call_id, event.tool_name);
      call.card.querySelector(".ask")?.remove();
      call.card.querySelector(".progress").textContent +=
        (event.approved ? "approved" : "denied") + (event.reason ? ": " + event.reason : "") + "\n";
      setCallState(call, event.approved ? "running" : "error");
      break;
    }
    case "ToolCallQueued": {
      const call = callOf(loop, event.tool_call_id, event.tool_name);
      call.queuedAt = at;
      call.bar.dataset.queuedStart = String(at);
      call.card.querySelector(".progress").textContent += "queued: " + event.reason + "\n";
      break;
    }
    case "ToolCallDequeued": {
      const call = callOf(loop, event.tool_call_id, event.tool_name);
      call.dequeuedAt = at;
      call.bar.dataset.queuedEnd = String(at);
      break;
    }
    case "ToolExecutionStart": {
      const call = callOf(loop, event.tool_call_id, event.tool_name);
      call.start = at;
      call.bar.dataset.start = String(at - runStart);
      call.card.querySelector(".args").textContent = JSON.stringify(event.args, null, 1);
      setCallState(call, "running");
      break;
    }
    case "ProgressMessage": {
      const call = callOf(loop, event.tool_call_id, event.tool_name);
      call.card.querySelector(".progress").textContent += event.text + "\n";
      break;
    }
    case "ToolExecutionUpdate": {
      const details = event.partial_result.details;
      if (details && typeof details === "object" && details.event && details.child_loop_id) {
        childParent.set(details.child_loop_id, loop + "/" + event.tool_call_id);
        handle(details.event, at); // a sub-agent's own event: drawn under its call
        break;
      }
      const call = callOf(loop, event.tool_call_id, event.tool_name);
      call.card.querySelector(".result").textContent = texts(event.partial_result.content);
      break;
    }
    case "ToolExecutionEnd": {
      const call = callOf(loop, event.tool_call_id, event.tool_name);
      call.end = at;
      if (call.start === null) { call.start = at; call.bar.dataset.start = String(at - runStart); }
      call.bar.dataset.end = String(at - runStart);
      call.bar.dataset.outcome = event.outcome;
      call.card.querySelector(".result").textContent = texts(event.result.content);
      setCallState(call, event.is_error ? "error" : "done");
      call.card.querySelector(".ask")?.remove();
      break;
    }
    case "TurnEnd": {
      if (!main) break;
      const u = event.usage;
      const row = el("tr");
      row.dataset.turn = String(event.turn_index);
      for (const v of [event.turn_index + 1, u.input + u.cache_read + u.cache_write, u.output, "$" + u.cost.toFixed(4)]) {
        row.append(el("td", "", String(v)));
      }
      byId("usage").tBodies[0].append(row);
      break;
    }
    case "AgentEnd":
      if (!main) break;
      for (const call of calls.values()) {
        if (call.end === null) { call.end = at; call.bar.dataset.end = String(at - runStart); }
        call.card.querySelector(".ask")?.remove();
      }
      const stop = event.stop_reason;
      byId("status").dataset.stop = stop.kind;
      note("Run ended: " + stop.kind + (stop.message ? " (" + stop.message + ")" : ""));
      break;
  }
}

function reset(state) {
  chat.replaceChildren();
  timeline.replaceChildren();
  byId("usage").tBodies[0].replaceChildren();
  calls = new Map();
  childParent = new Map();
  assistant = null;
  runStart = null;
  showState(state);
  setRunning(state.running);
  const results = new Map();
  for (const m of state.messages) if (m.role === "tool_result") results.set(m.tool_call_id, m);
  for (const m of state.messages) {
    if (m.role === "user") chat.append(el("div", "msg user", texts(m.content)));
    if (m.role !== "assistant") continue;
    const text = texts(m.content);
    if (text) chat.append(el("div", "msg assistant", text));
    for (const block of m.content) {
      if (block.type !== "tool_call") continue;
      const call = callOf("main", block.id, block.name);
      call.card.querySelector(".args").textContent = JSON.stringify(block.arguments, null, 1);
      const result = results.get(block.id);
      if (result) {
        call.card.querySelector(".result").textContent = texts(result.content);
        setCallState(call, result.is_error ? "error" : "done");
      }
    }
  }
  timeline.replaceChildren(); // the timeline is the live run's
  for (const pending of state.pending) {
    const call = callOf("main", pending.tool_call_id, pending.tool_name);
    ask(call, pending.reason);
  }
  chat.scrollTop = chat.scrollHeight;
  loadSessions();
}

function frame(data) {
  lastAt = Math.max(lastAt, data.at);
  if (data.reset) reset(data.reset);
  else if (data.event) handle(data.event, data.at);
  else if (data.error) note("The run failed: " + data.error, "error");
  else if (data.idle) { setRunning(false); showState(data.idle); loadSessions(); }
  layout();
}

// ------------------------------------------------------------------ sessions

async function loadSessions() {
  const response = await fetch("/api/sessions", { headers: { "X-Agentloop-Token": token } });
  const { sessions } = await response.json();
  const list = byId("sessions");
  list.replaceChildren();
  if (!sessions.length) list.append(el("li", "dim", "No saved sessions yet."));
  for (const s of sessions) {
    const item = el("li");
    item.dataset.sessionId = s.id;
    item.dataset.current = String(s.id === currentSession);
    const resume = el("button", "resume", "Resume");
    resume.type = "button";
    resume.disabled = running || s.id === currentSession;
    resume.onclick = () => post("/api/resume", { session_id: s.id });
    item.append(el("span", "title", s.title || "(no prompt)"), el("span", "dim", s.messages + " messages, " + s.modified), resume);
    list.append(item);
  }
}

// ------------------------------------------------------------------ the controls

byId("composer").addEventListener("submit", async (e) => {
  e.preventDefault();
  const input = byId("input");
  const text = input.value.trim();
  if (!text) return;
  input.value = "";
  if (running) {
    await post("/api/steer", { text });
    note("Steering: " + text);
  } else {
    await post("/api/prompt", { text });
  }
});
byId("input").addEventListener("keydown", (e) => {
  if (e.key === "Enter" && !e.shiftKey) { e.preventDefault(); byId("composer").requestSubmit(); }
});
byId("abort").onclick = () => post("/api/abort");
byId("new").onclick = () => post("/api/new");

const stream = new EventSource("/api/events?token=" + encodeURIComponent(token));
stream.onmessage = (e) => frame(JSON.parse(e.data));
setInterval(() => { if (running) { lastAt += 100; layout(); } }, 100);
