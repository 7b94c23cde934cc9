// The fleet as nodes x GPUs with the replicas on them, at any point of the log.
// Plain DOM, no build step; every value is inserted as text, never as HTML.
const $ = (id) => document.getElementById(id);
const token = $("token");
token.value = localStorage.getItem("llmgw-token") ?? "";
token.addEventListener("change", () => {
  localStorage.setItem("llmgw-token", token.value);
  refresh();
});

async function api(path) {
  const headers = token.value ? { authorization: `Bearer ${token.value}` } : {};
  const res = await fetch(path, { headers });
  const body = await res.json();
  if (!res.ok) throw new Error(body?.error?.message ?? `${path}: ${res.status}`);
  return body;
}

function el(tag, text, cls) {
  const e = document.createElement(tag);
  if (text !== undefined) e.textContent = String(text);
  if (cls) e.className = cls;
  return e;
}

const colors = new Map();
function colorOf(model) {
  if (!colors.has(model)) colors.set(model, `hsl(${(colors.size * 67) % 360} 60% 80%)`);
  return colors.get(model);
}

function renderFleet(fleet) {
  const nodes = $("nodes");
  nodes.replaceChildren();
  for (const n of fleet.nodes) {
    const tr = el(
      "tr",
      undefined,
      `node ${n.liveness}${n.draining ? " draining" : n.cordoned ? " cordoned" : ""}`,
    );
    tr.append(el("td", `${n.nodeId} · ${n.liveness}`));
    for (const g of n.gpus) {
      const s = g.shards[0];
      const td = el("td", s ? `${s.replicaId} ${s.state}` : `GPU ${g.index}`, `gpu ${s ? "" : "free"}`);
      if (g.problems.length) td.classList.add("sick");
      if (s) td.style.background = colorOf(s.model);
      td.title = `${g.product}\n${g.memoryUsedMb}/${g.memoryTotalMb} MiB${s ? `\n${s.model} ${s.shardId}` : ""}`;
      tr.append(td);
    }
    nodes.append(tr);
  }
  const reps = $("replicas");
  reps.replaceChildren();
  const head = el("tr");
  for (const h of ["replica", "model", "profile", "phase", "nodes", "pending"]) head.append(el("th", h));
  reps.append(head);
  for (const r of fleet.replicas) {
    const tr = el("tr");
    for (const v of [r.replicaId, r.model, r.profile, r.phase, r.nodeIds.join(", "), r.pendingReason])
      tr.append(el("td", v));
    tr.firstChild.style.background = colorOf(r.model);
    reps.append(tr);
  }
}

function describe(e) {
  if (e.malformed) return `#${e.seq} malformed: ${e.malformed}`;
  const [kind, body] = Object.entries(e.event).find(([k]) => !["id", "timeUnixMs", "writer"].includes(k)) ?? [
    "?",
    {},
  ];
  if (kind === "reconcilePass") {
    const d = (body.decisions ?? []).map((x) => x.explanation).filter(Boolean);
    return `#${e.seq} reconcile pass: ${d.join("; ") || "no decisions"}`;
  }
  return `#${e.seq} ${kind} ${body.nodeId ?? body.gatewayId ?? ""}`;
}

async function show(seq) {
  try {
    const [fleet, events] = await Promise.all([
      api(`/v1/fleet?at=${seq}`),
      api(`/v1/events?after=${Math.max(0, seq - 15)}&limit=15`),
    ]);
    $("at").textContent =
      `sequence ${fleet.seq}${fleet.timeMs ? ` · ${new Date(fleet.timeMs).toISOString()}` : ""}`;
    renderFleet(fleet);
    const list = $("events");
    list.replaceChildren(...events.events.filter((e) => e.seq <= seq).map((e) => el("li", describe(e))));
    $("error").textContent = "";
  } catch (err) {
    $("error").textContent = err.message;
  }
}

async function refresh() {
  try {
    const page = await api("/v1/events?limit=1");
    const slider = $("slider");
    const follow = $("live").checked || Number(slider.value) === Number(slider.max);
    slider.max = String(page.lastSeq);
    if (follow) slider.value = String(page.lastSeq);
    await show(Number(slider.value));
  } catch (err) {
    $("error").textContent = err.message;
  }
}

$("slider").addEventListener("input", (e) => {
  $("live").checked = false;
  show(Number(e.target.value));
});
setInterval(() => $("live").checked && refresh(), 2000);
refresh();
