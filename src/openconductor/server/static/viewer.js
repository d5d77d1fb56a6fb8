// Trace viewer: recent runs, and one run's workflow graph and steps. Plain DOM, no build step.
// Every piece of run content is inserted as text (never as HTML).
"use strict";

const state = { key: localStorage.getItem("openconductor.key") || "", selected: null, run: null, timer: null };
const SVG = "http://www.w3.org/2000/svg";
const COLORS = { ok: "#2e7d32", error: "#c62828", running: "#0277bd", pending: "#9e9e9e", skipped: "#ef6c00" };

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") node.className = v;
    else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, v);
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function svg(tag, attrs, ...children) {
  const node = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, v);
  }
  for (const child of children.flat()) node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  return node;
}

async function api(path) {
  const headers = state.key ? { Authorization: "Bearer " + state.key } : {};
  const response = await fetch(path, { headers });
  if (response.status === 401) {
    document.getElementById("key-form").hidden = false;
    document.getElementById("conn").textContent = "this server needs an API key";
    throw new Error("unauthorized");
  }
  if (!response.ok) throw new Error(path + ": HTTP " + response.status);
  document.getElementById("conn").textContent = "";
  return response.json();
}

const fmtTokens = (n) => (n || 0).toLocaleString("en-US");
const fmtCost = (c) => (c ? "$" + c.toFixed(5) : "$0");
const fmtSec = (s) => (s || 0).toFixed(s < 1 ? 3 : 2) + " s";
const tokensOf = (u) => (u ? (u.input_tokens || 0) + (u.output_tokens || 0) : 0);

// ------------------------------------------------------------------------------------------ run list

async function loadRuns() {
  let list;
  try { list = await api("/v1/traces?limit=50"); } catch (e) { return; }
  const ul = document.getElementById("runs");
  ul.replaceChildren(...list.data.map((row) => el("li", {
      class: row.id === state.selected ? "selected" : "", "data-run": row.id,
      onclick: () => { location.hash = "#/run/" + row.id; },
    },
    el("span", { class: "q" }, row.question),
    el("span", { class: "meta" }, el("span", { class: "badge " + row.status }, row.status), " ",
       new Date(row.created_at * 1000).toLocaleTimeString(), " · ", row.policy, " · ", row.steps, " steps · ",
       fmtTokens(row.tokens), " tok · ", row.id))));
  if (!list.data.length) ul.replaceChildren(el("li", { class: "muted" }, "No runs yet."));
}

// ---------------------------------------------------------------------------------------- the graph

function visible(step) {
  if (step.access === "all") return Array.from({ length: step.index }, (_, j) => j);
  return step.visible && step.visible.length ? step.visible : step.access || [];
}

function drawGraph(run) {
  const steps = run.steps;
  const level = [];
  steps.forEach((s, i) => { level[i] = Math.max(0, ...visible(s).map((j) => level[j] + 1)); });
  const columns = [];
  steps.forEach((s, i) => { (columns[level[i]] = columns[level[i]] || []).push(i); });
  const W = 170, H = 54, GX = 70, GY = 22, PAD = 16;
  const pos = {};
  const taskX = PAD, firstX = PAD + 110 + GX;
  const rows = Math.max(1, ...columns.map((c) => c.length));
  const height = PAD * 2 + rows * H + (rows - 1) * GY;
  columns.forEach((col, c) => col.forEach((i, r) => {
    const offset = (height - (col.length * H + (col.length - 1) * GY)) / 2;
    pos[i] = { x: firstX + c * (W + GX), y: offset + r * (H + GY) };
  }));
  const answerX = firstX + columns.length * (W + GX);
  const width = answerX + 110 + PAD;
  const root = svg("svg", { width, height, viewBox: `0 0 ${width} ${height}`, role: "img", "aria-label": "workflow graph" },
    svg("defs", {}, svg("marker", { id: "arrow", viewBox: "0 0 10 10", refX: 10, refY: 5, markerWidth: 7, markerHeight: 7, orient: "auto-start-reverse" },
      svg("path", { d: "M 0 0 L 10 5 L 0 10 z", fill: "#8c959f" }))));
  const edge = (x1, y1, x2, y2, cls) => {
    const mx = (x1 + x2) / 2;
    root.append(svg("path", { class: "edge " + (cls || ""), d: `M ${x1} ${y1} C ${mx} ${y1}, ${mx} ${y2}, ${x2} ${y2}` }));
  };
  const mid = height / 2;
  // Every step sees the overall task; edges from earlier steps are its access list.
  steps.forEach((s, i) => {
    const p = pos[i];
    const seen = visible(s);
    if (!seen.length) edge(taskX + 110, mid, p.x, p.y + H / 2, "from-task");
    seen.forEach((j) => edge(pos[j].x + W, pos[j].y + H / 2, p.x, p.y + H / 2, "access"));
  });
  if (steps.length) { const last = pos[steps.length - 1]; edge(last.x + W, last.y + H / 2, answerX, mid, "to-answer"); }
  const terminal = (x, label, color) => root.append(svg("g", {},
    svg("rect", { x, y: mid - 20, width: 110, height: 40, rx: 20, fill: color, stroke: color }),
    svg("text", { x: x + 55, y: mid + 4, "text-anchor": "middle", fill: "#fff", "font-weight": 600 }, label)));
  terminal(taskX, "task", "#57606a");
  terminal(answerX, "answer", run.final_answer ? COLORS.ok : COLORS.pending);
  steps.forEach((s, i) => {
    const p = pos[i];
    const color = COLORS[s.status] || COLORS.pending;
    const name = s.worker_name.length > 22 ? s.worker_name.slice(0, 21) + "…" : s.worker_name;
    root.append(svg("g", { class: "node", "data-step": i, onclick: () => focusStep(run.depth, i) },
      svg("title", {}, `step ${i}: ${s.worker_name}\n${s.subtask}`),
      svg("rect", { x: p.x, y: p.y, width: W, height: H, stroke: color }),
      svg("text", { x: p.x + 10, y: p.y + 20, "font-weight": 600, fill: color }, `step ${i} · ${s.status}`),
      svg("text", { x: p.x + 10, y: p.y + 40, class: "worker" }, name)));
  });
  return el("div", { class: "graph" }, root);
}

function focusStep(depth, i) {
  const card = document.getElementById(`step-${depth}-${i}`);
  if (!card) return;
  card.scrollIntoView({ behavior: "smooth", block: "center" });
  card.classList.add("flash");
  setTimeout(() => card.classList.remove("flash"), 1200);
}

// ----------------------------------------------------------------------------------------- the steps

function stepCard(step, depth) {
  const access = step.access === "all" ? "all" : "[" + (step.access || []).join(", ") + "]";
  return el("div", { class: "step " + step.status, id: `step-${depth}-${step.index}` },
    el("h3", {}, `step ${step.index} · `, el("span", { class: "worker" }, step.worker_name), ` (id ${step.worker}) `,
       el("span", { class: "badge " + step.status }, step.status)),
    el("div", { class: "stats" }, `sees ${access} · ${fmtTokens(tokensOf(step.usage))} tokens (${fmtTokens(step.usage.input_tokens)} in / ${fmtTokens(step.usage.output_tokens)} out) · ${fmtSec(step.latency_s)} · ${fmtCost(step.usage.cost_usd)} · ${step.attempts} attempt(s)`),
    el("div", { class: "subtask" }, step.subtask),
    step.error ? el("div", { class: "err" }, step.error) : null,
    step.messages && step.messages.length
      ? el("details", {}, el("summary", {}, `context (${step.messages.length} message${step.messages.length > 1 ? "s" : ""})`),
          step.messages.map((m) => el("pre", { class: "context" }, `[${m.role}]\n${m.content}`)))
      : null,
    step.output ? el("pre", { class: "output" }, step.output) : el("div", { class: "muted" }, step.status === "running" ? "running…" : "no output"),
    step.nested ? el("div", { class: "nested" }, el("h4", {}, `recursive round (depth ${step.nested.depth})`), renderRound(step.nested)) : null);
}

function renderRound(run) {
  const parts = [];
  if (run.plan && run.plan.fallback) parts.push(el("p", { class: "err" }, "conductor fallback: " + run.plan.fallback));
  if (run.plan && run.plan.errors && run.plan.errors.length) parts.push(el("details", {}, el("summary", {}, `${run.plan.errors.length} rejected plan(s)`), run.plan.errors.map((e) => el("pre", {}, e))));
  if (run.steps.length) parts.push(drawGraph(run));
  else if (run.plan && run.status === "ok") parts.push(el("p", { class: "muted" }, "accepted the previous answer"));
  parts.push(...run.steps.map((s) => stepCard(s, run.depth)));
  return parts;
}

// Which conductor planned (the run's metadata.conductor, conductor/identity.py's ConductorIdentity; its line() says the same).
function plannedBy(c) {
  if (!c || !c.kind) return null;
  if (c.kind === "checkpoint") return `trained conductor ${c.checkpoint} (${c.sha256 ? "sha256 " + c.sha256.slice(0, 12) : "no weights found"}, base ${c.base_model || "unknown"}, ${c.engine})`;
  if (c.kind === "prompted") return `prompted conductor: worker ${c.worker} (${c.provider} / ${c.model || "-"})`;
  return `policy ${c.policy} (no conductor model plans)`;
}

function renderRun(run) {
  const t = run.totals;
  const usage = { input: t.worker_usage.input_tokens + t.conductor_usage.input_tokens, output: t.worker_usage.output_tokens + t.conductor_usage.output_tokens };
  const perWorker = Object.entries(t.per_worker || {}).map(([name, u]) => `${name} ${fmtTokens(tokensOf(u))}`).join(", ");
  const section = document.getElementById("run");
  const replace = (...nodes) => section.replaceChildren(...nodes.filter((n) => n !== null && n !== undefined));
  replace(
    el("div", {}, el("span", { class: "badge " + run.status, id: "run-status" }, run.status), " ",
       el("span", { class: "muted" }, `run ${run.id} · policy ${run.policy} · pool ${run.pool}` + (run.metadata && run.metadata.preset ? ` · preset ${run.metadata.preset}@${run.metadata.version}` : ""))),
    plannedBy(run.metadata && run.metadata.conductor) ? el("div", { class: "muted", id: "run-planner" }, "planned by " + plannedBy(run.metadata.conductor)) : null,
    el("div", { class: "question" }, run.question),
    el("div", { class: "totals" },
      el("span", {}, el("b", {}, t.calls), " worker calls"),
      el("span", {}, el("b", {}, fmtTokens(usage.input + usage.output)), " tokens (conductor ", fmtTokens(tokensOf(t.conductor_usage)), ", workers ", fmtTokens(tokensOf(t.worker_usage)), ")"),
      perWorker ? el("span", {}, "per worker: ", perWorker) : null,
      el("span", {}, el("b", {}, fmtCost(t.worker_usage.cost_usd + t.conductor_usage.cost_usd)), " cost"),
      el("span", {}, el("b", {}, fmtSec(t.wall_s)), " wall"),
      run.limits_hit && run.limits_hit.length ? el("span", { class: "err" }, "limits hit: " + run.limits_hit.join(", ")) : null),
    run.error ? el("p", { class: "err" }, run.error) : null,
    ...renderRound(run),
    el("h3", {}, "Final answer"),
    el("div", { class: "answer", id: "final-answer" }, run.final_answer || (run.status === "running" ? "…" : "(no answer)")));
}

// ------------------------------------------------------------------------------------------- routing

async function showRun(id) {
  clearTimeout(state.timer);
  state.selected = id;
  document.querySelectorAll("#runs li").forEach((li) => li.classList.toggle("selected", li.dataset.run === id));
  let run;
  try { run = await api("/v1/traces/" + encodeURIComponent(id)); }
  catch (e) { document.getElementById("run").replaceChildren(el("p", { class: "err" }, String(e.message))); return; }
  if (state.selected !== id) return;
  state.run = run;
  renderRun(run);
  // Follow a run in progress: the server keeps it in memory and updates it on every executor event.
  if (run.status === "running") state.timer = setTimeout(() => { showRun(id); loadRuns(); }, 700);
}

function route() {
  const match = location.hash.match(/^#\/run\/([\w-]+)/);
  if (match) showRun(match[1]);
}

document.getElementById("key-form").addEventListener("submit", (event) => {
  event.preventDefault();
  state.key = document.getElementById("key-input").value.trim();
  localStorage.setItem("openconductor.key", state.key);
  document.getElementById("key-form").hidden = true;
  loadRuns().then(route);
});

window.addEventListener("hashchange", route);
loadRuns().then(route);
setInterval(loadRuns, 3000);
