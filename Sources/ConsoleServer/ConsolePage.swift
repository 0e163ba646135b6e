import CoordCore
import Coordinator

/// The operator's console page: one self-contained document (inline CSS and JavaScript, nothing from the network).
/// It follows the rig over the WebSocket at /ws and acts through the JSON API (docs/console-api.md). Every text
/// from the server goes in through textContent, never as markup. Its lists of take states and control names are
/// the Swift enums' (LiveRig.TakeState, CameraControls.Name), so the page cannot drift from the API.
enum ConsolePage {
    /// A JavaScript array of strings.
    static func list(_ names: [String]) -> String { "[" + names.map { "\"\($0)\"" }.joined(separator: ", ") + "]" }

    static let html = #"""
<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>coord console</title>
<style>
  :root { --bg:#111315; --panel:#1b1e21; --line:#2c3136; --text:#d8dde2; --dim:#8a939c; --ok:#5fbf7a; --warn:#e0b050; --bad:#e06060; --accent:#5aa0e0; }
  * { box-sizing: border-box; }
  body { margin:0; background:var(--bg); color:var(--text); font:14px/1.4 system-ui, sans-serif; }
  header { display:flex; align-items:center; gap:16px; padding:8px 16px; border-bottom:1px solid var(--line); }
  header h1 { font-size:16px; margin:0; font-weight:600; }
  #connection { margin-left:auto; color:var(--dim); }
  #banner { display:none; background:var(--bad); color:#fff; padding:6px 16px; font-weight:600; }
  #banner.shown { display:block; }
  main { display:grid; grid-template-columns: 1fr 360px; gap:12px; padding:12px; }
  section { background:var(--panel); border:1px solid var(--line); border-radius:6px; padding:10px; margin-bottom:12px; }
  h2 { font-size:13px; text-transform:uppercase; letter-spacing:.06em; color:var(--dim); margin:0 0 8px; font-weight:600; }
  button { background:#2a3036; color:var(--text); border:1px solid #3a424a; border-radius:4px; padding:5px 10px; cursor:pointer; font:inherit; }
  button:hover:not(:disabled) { border-color:var(--accent); }
  button:disabled { opacity:.45; cursor:default; }
  button.primary { background:#23476b; border-color:#2f5f8f; }
  button.danger { background:#6b2323; border-color:#8f2f2f; }
  input, select { background:#0e1012; color:var(--text); border:1px solid #3a424a; border-radius:4px; padding:4px 6px; font:inherit; width:100%; }
  label { display:block; color:var(--dim); font-size:12px; margin:6px 0 2px; }
  .row { display:flex; gap:8px; align-items:end; }
  .row > * { flex:1; }
  .message { min-height:1.4em; font-size:12px; margin-top:6px; color:var(--dim); }
  .message.error { color:var(--bad); }
  #view-controls { display:flex; gap:8px; margin-bottom:8px; align-items:center; }
  #view-controls .group { margin-left:auto; color:var(--dim); font-variant-numeric:tabular-nums; }
  #tiles { display:grid; grid-template-columns:repeat(auto-fill, minmax(300px, 1fr)); gap:8px; }
  .tile { position:relative; background:#000; border:1px solid var(--line); border-radius:4px; overflow:hidden; cursor:pointer; aspect-ratio: 4 / 3; }
  .tile img { width:100%; height:100%; object-fit:contain; display:block; }
  .tile .caption { position:absolute; left:0; right:0; bottom:0; background:rgba(0,0,0,.65); padding:3px 6px; font-size:12px;
                   display:flex; flex-wrap:wrap; gap:2px 10px; font-variant-numeric:tabular-nums; }
  .tile .caption .name { font-weight:600; }
  .tile .nosignal { display:none; position:absolute; inset:0; align-items:center; justify-content:center; color:var(--dim); }
  .tile.missing img, .tile img:not([src]) { visibility:hidden; }
  .tile.waiting .nosignal { display:flex; }
  .tile.missing .nosignal { display:flex; }
  .tile.missing { border-color:var(--bad); }
  #tiles.pip { display:block; position:relative; }
  #tiles.pip .tile.hero { width:100%; }
  #tiles.pip .tile:not(.hero) { display:inline-block; width:180px; margin:6px 6px 0 0; vertical-align:top; }
  .pressure-fair { color:var(--warn); } .pressure-serious, .pressure-critical, .pressure-shutdown { color:var(--bad); }
  table { width:100%; border-collapse:collapse; font-size:13px; }
  td, th { text-align:left; padding:3px 4px; border-bottom:1px solid var(--line); vertical-align:top; }
  th { color:var(--dim); font-weight:500; }
  tr.unreachable td { color:var(--bad); }
  #take-state { font-variant-numeric:tabular-nums; margin-top:8px; }
  #events { list-style:none; margin:0; padding:0; max-height:320px; overflow:auto; font-size:12px; }
  #events li { padding:3px 0; border-bottom:1px solid var(--line); }
  #events li.serious { color:var(--bad); }
  #events .time { color:var(--dim); margin-right:6px; font-variant-numeric:tabular-nums; }
  #events .kind { color:var(--accent); margin-right:6px; }
  a { color:var(--accent); }
</style>
</head>
<body>
<header><h1>coord console</h1><span id="rig-summary"></span><span id="connection">connecting…</span></header>
<div id="banner">console connection lost — retrying</div>
<main>
  <div>
    <section>
      <div id="view-controls">
        <button id="layout-grid">Grid</button>
        <button id="layout-pip">Picture in picture</button>
        <span class="group" id="set-group"></span>
      </div>
      <div id="tiles"></div>
    </section>
    <section>
      <h2>Nodes</h2>
      <table><thead><tr><th>node</th><th>state</th><th>pressure</th><th>clock ±µs</th><th>sound</th><th>take</th><th>message</th></tr></thead>
      <tbody id="nodes"></tbody></table>
    </section>
  </div>
  <div>
    <section id="take">
      <h2>Take</h2>
      <div class="row">
        <div><label for="take-name">name</label><input id="take-name" placeholder="take"></div>
        <div><label for="take-seconds">seconds (empty: until stopped)</label><input id="take-seconds" type="number" min="0" step="any"></div>
      </div>
      <div class="row" style="margin-top:8px">
        <button id="take-start" class="primary">Start</button>
        <button id="take-stop" class="danger" disabled>Stop</button>
      </div>
      <div id="take-state">no take running</div>
      <div id="take-message" class="message"></div>
    </section>
    <section id="controls">
      <h2>Camera controls</h2>
      <label for="control-camera">camera</label><select id="control-camera"></select>
      <div class="row">
        <div><label for="control-exposure_us">exposure µs</label><input id="control-exposure_us" type="number"></div>
        <div><label for="control-gain_db">gain dB</label><input id="control-gain_db" type="number" step="any"></div>
      </div>
      <div class="row">
        <div><label for="control-white_balance_k">white balance K</label><input id="control-white_balance_k" type="number"></div>
        <div><label for="control-focus">focus 0…1</label><input id="control-focus" type="number" step="0.01" min="0" max="1"></div>
      </div>
      <div class="row" style="margin-top:8px">
        <button id="control-apply">Apply</button>
        <button id="control-apply-all">Apply to all cameras</button>
      </div>
      <div id="control-message" class="message"></div>
      <div id="control-take-note" class="message"></div>
      <div class="row" style="margin-top:8px"><button id="rig-save">Save as the rig file's defaults</button></div>
      <div class="message">Writes the controls set here into the rig file this console was started with, so every take starts with them: only those values change in its text, its comments and layout stay; the file as it was is kept beside it as <code>.bak</code>. Or <a id="rig-file" href="api/rig/rig.yaml" download>download the rig file with these controls</a>.</div>
      <div id="rig-save-message" class="message"></div>
    </section>
    <section>
      <h2>Takes</h2>
      <table><tbody id="takes"></tbody></table>
    </section>
    <section>
      <h2>Events</h2>
      <ul id="events"></ul>
    </section>
  </div>
</main>
<script>
"use strict";
const $ = (id) => document.getElementById(id);
const state = { rig: null, hero: null, layout: "grid", take: null, tiles: new Map() };
const CONTROL_KEYS = \#(list(CameraControls.Name.allCases.map(\.rawValue)));
// A take in one of these states is running: no other can start.
const RUNNING_TAKE = \#(list(LiveRig.TakeState.allCases.filter(\.isRunning).map(\.rawValue)));

function el(tag, text, cls) {
  const e = document.createElement(tag);
  if (text !== undefined && text !== null) e.textContent = String(text);
  if (cls) e.className = cls;
  return e;
}
function keyOf(node, camera) { return node + "/" + camera; }
function nodeInfo(name) { return state.rig ? state.rig.nodes.find((n) => n.name === name) : null; }

async function api(method, path, body) {
  const options = { method, headers: {} };
  if (body !== undefined) { options.headers["Content-Type"] = "application/json"; options.body = JSON.stringify(body); }
  const response = await fetch(path, options);
  let data = null;
  try { data = await response.json(); } catch (e) { data = null; }
  if (!response.ok) throw new Error((data && data.error) || ("HTTP " + response.status));
  return data;
}
function say(id, text, isError) { const m = $(id); m.textContent = text || ""; m.classList.toggle("error", !!isError); }

// ---- multiview ----
function tileFor(node, camera) {
  const key = keyOf(node, camera);
  let tile = state.tiles.get(key);
  if (tile) return tile;
  const root = el("div", null, "tile");
  root.dataset.node = node; root.dataset.camera = camera;
  const img = el("img"); img.alt = key;
  const nosignal = el("div", "waiting for the first frame", "nosignal");
  // No picture (and no broken-image icon) until the first tile has loaded.
  root.classList.add("waiting");
  const caption = el("div", null, "caption");
  const parts = { name: el("span", key, "name"), group: el("span"), phase: el("span"), drops: el("span"), pressure: el("span"), clock: el("span") };
  Object.values(parts).forEach((p) => caption.appendChild(p));
  root.append(img, nosignal, caption);
  root.addEventListener("click", () => { state.hero = key; setLayout("pip"); });
  tile = { root, img, nosignal, parts };
  state.tiles.set(key, tile);
  $("tiles").appendChild(root);
  return tile;
}
function showSet(set) {
  $("set-group").textContent = "group " + set.group + (set.take_id ? " · take " + set.take_id : " · preview") + (set.complete ? "" : " · incomplete");
  for (const t of set.tiles) {
    const tile = tileFor(t.node, t.camera);
    const node = nodeInfo(t.node);
    tile.root.classList.toggle("missing", !!t.missing);
    tile.root.dataset.group = t.group === null || t.group === undefined ? "" : String(t.group);
    if (t.missing) tile.nosignal.textContent = "no frame for group " + set.group;
    tile.parts.group.textContent = t.group !== null && t.group !== undefined ? "g " + t.group : "";
    tile.parts.phase.textContent = t.phase_error_us !== null && t.phase_error_us !== undefined ? "phase " + t.phase_error_us + " µs" : "";
    tile.parts.drops.textContent = "drops " + (t.drops || 0);
    tile.parts.pressure.textContent = node ? node.pressure : "";
    tile.parts.pressure.className = node ? "pressure-" + node.pressure : "";
    tile.parts.clock.textContent = node && node.clock_uncertainty_us !== null && node.clock_uncertainty_us !== undefined ? "clock ±" + node.clock_uncertainty_us + " µs" : "";
    if (t.image && !t.missing) {
      // Swap only once loaded, so a tile never flashes empty.
      const next = new Image();
      next.onload = () => { tile.img.src = next.src; tile.root.classList.remove("waiting"); };
      next.src = t.image;
    }
  }
  applyLayout();
}
function setLayout(layout) { state.layout = layout; applyLayout(); }
function applyLayout() {
  const tiles = $("tiles");
  tiles.classList.toggle("pip", state.layout === "pip");
  if (state.layout === "pip" && (!state.hero || !state.tiles.has(state.hero))) state.hero = state.tiles.keys().next().value || null;
  for (const [key, tile] of state.tiles) {
    const hero = state.layout === "pip" && key === state.hero;
    tile.root.classList.toggle("hero", hero);
    if (hero && tiles.firstChild !== tile.root) tiles.insertBefore(tile.root, tiles.firstChild);
  }
}

// ---- sound: one level meter per microphone (-60 … 0 dBFS), shown while a take runs ----
function soundCell(mics) {
  const cell = el("td", mics.length ? null : "—");
  for (const m of mics) {
    const meter = document.createElement("meter");
    meter.min = -60; meter.max = 0; meter.low = -20; meter.high = -6; meter.optimum = -30;
    meter.value = Math.max(-60, Math.min(0, m.level_dbfs));
    meter.className = "mic-level";
    meter.dataset.mic = m.mic;
    meter.title = m.mic + ": " + (m.error ? m.error : m.level_dbfs.toFixed(1) + " dBFS");
    cell.append(el("span", m.mic + " "), meter, el("span", " " + (m.error ? "ended" : m.level_dbfs.toFixed(0) + " dB")));
  }
  return cell;
}

// ---- rig ----
function showRig(rig) {
  state.rig = rig;
  const body = $("nodes");
  body.replaceChildren();
  for (const n of rig.nodes) {
    const row = el("tr", null, n.reachable ? "" : "unreachable");
    row.dataset.node = n.name;
    row.append(el("td", n.name), el("td", n.state), el("td", n.pressure, "pressure-" + n.pressure),
               el("td", n.clock_uncertainty_us === null || n.clock_uncertainty_us === undefined ? "—" : n.clock_uncertainty_us),
               soundCell(n.mics || []), el("td", n.take_id || ""), el("td", n.message || ""));
    body.appendChild(row);
  }
  const reachable = rig.nodes.filter((n) => n.reachable).length;
  $("rig-summary").textContent = reachable + "/" + rig.nodes.length + " nodes, " + rig.cameras.length + " cameras";
  for (const c of rig.cameras) {
    const tile = tileFor(c.node, c.camera);
    tile.root.style.aspectRatio = c.width + " / " + c.height;
  }
  const select = $("control-camera");
  const chosen = select.value;
  const options = rig.cameras.map((c) => keyOf(c.node, c.camera));
  if ([...select.options].map((o) => o.value).join() !== options.join()) {
    select.replaceChildren(...options.map((k) => { const o = el("option", k); o.value = k; return o; }));
    if (options.includes(chosen)) select.value = chosen;
    fillControls();
  } else if (JSON.stringify(selectedCamera() ? selectedCamera().controls : null) !== state.filled && !editingControls()) {
    // The camera's values changed (read from the node, or applied): shown, unless the operator is typing.
    fillControls();
  }
  showTakeNote();
}
// A value the next take will change on the selected camera (the rig file's, say, after the console restarted):
// said beside the fields, so what is shown is not mistaken for what will be recorded.
function showTakeNote() {
  const camera = selectedCamera();
  const next = camera ? camera.take_controls || {} : {};
  const changed = CONTROL_KEYS.filter((k) => next[k] !== undefined && next[k] !== null && next[k] !== camera.controls[k]);
  say("control-take-note", changed.length === 0 ? "" :
    "the next take sets " + changed.map((k) => k + " " + next[k] + " (now " + (camera.controls[k] ?? "unknown") + ")").join(", ") +
    "; Apply the values shown to keep them");
}
function selectedCamera() {
  return state.rig ? state.rig.cameras.find((c) => keyOf(c.node, c.camera) === $("control-camera").value) : null;
}
function editingControls() {
  const active = document.activeElement;
  return !!(active && active.id && active.id.startsWith("control-") && active.tagName === "INPUT");
}
function fillControls() {
  if (!state.rig) return;
  const camera = selectedCamera();
  state.filled = JSON.stringify(camera ? camera.controls : null);
  for (const k of CONTROL_KEYS) {
    const v = camera && camera.controls ? camera.controls[k] : undefined;
    $("control-" + k).value = v === undefined || v === null ? "" : v;
  }
}
function controlBody() {
  const body = {};
  for (const k of CONTROL_KEYS) {
    const text = $("control-" + k).value.trim();
    if (text !== "") body[k] = Number(text);
  }
  return body;
}
function describeControls(c) {
  return CONTROL_KEYS.filter((k) => c[k] !== undefined && c[k] !== null).map((k) => k + " " + c[k]).join(", ");
}

// ---- takes ----
function showTake(take) {
  state.take = take;
  const running = take && RUNNING_TAKE.includes(take.state);
  $("take-start").disabled = !!running;
  $("take-stop").disabled = !(take && take.state === "recording");
  if (!take) { $("take-state").textContent = "no take running"; return; }
  const elapsed = take.elapsed_s ? take.elapsed_s.toFixed(1) + " s" : "";
  const of = take.seconds ? " of " + take.seconds + " s" : "";
  $("take-state").textContent = (take.take_id || take.name) + ": " + take.state + (elapsed ? " · " + elapsed + of : "");
  say("take-message", take.message || "", take.state === "failed" || take.state === "partial");
}
function showTakes(takes) {
  const body = $("takes");
  body.replaceChildren();
  for (const t of takes) {
    const row = el("tr");
    const cell = el("td");
    if (t.report) { const a = el("a", t.take_id); a.href = t.report; a.target = "_blank"; cell.appendChild(a); }
    else cell.textContent = t.take_id;
    row.append(cell, el("td", t.status));
    body.appendChild(row);
  }
}
function showEvent(e) {
  const list = $("events");
  const item = el("li");
  if (/fail|lost|abort|disabled|partial|missing|unreachable/.test(e.kind + " " + e.text)) item.className = "serious";
  const time = (e.time || "").replace(/^.*T/, "").replace(/Z$/, "");
  item.append(el("span", time, "time"), el("span", e.kind, "kind"));
  if (e.node) item.append(el("span", e.node + (e.camera ? "/" + e.camera : "") + " "));
  item.append(el("span", e.text));
  list.insertBefore(item, list.firstChild);
  while (list.children.length > 200) list.removeChild(list.lastChild);
}

// ---- wiring ----
$("layout-grid").addEventListener("click", () => setLayout("grid"));
$("layout-pip").addEventListener("click", () => setLayout("pip"));
$("control-camera").addEventListener("change", () => { fillControls(); showTakeNote(); });
$("take-start").addEventListener("click", async () => {
  const body = {};
  const name = $("take-name").value.trim();
  const seconds = $("take-seconds").value.trim();
  if (name) body.name = name;
  if (seconds) body.seconds = Number(seconds);
  try { showTake(await api("POST", "/api/takes", body)); say("take-message", ""); }
  catch (e) { say("take-message", e.message, true); }
});
$("take-stop").addEventListener("click", async () => {
  try { showTake(await api("POST", "/api/takes/stop", {})); } catch (e) { say("take-message", e.message, true); }
});
$("control-apply").addEventListener("click", async () => {
  const [node, camera] = $("control-camera").value.split("/");
  try {
    const answer = await api("PUT", "/api/cameras/" + encodeURIComponent(node) + "/" + encodeURIComponent(camera) + "/controls", controlBody());
    say("control-message", node + "/" + camera + ": " + describeControls(answer.controls));
    $("control-message").dataset.inForceFromGroup = answer.in_force_from_group;
  } catch (e) { say("control-message", e.message, true); }
});
$("control-apply-all").addEventListener("click", async () => {
  try {
    const answer = await api("PUT", "/api/controls", controlBody());
    say("control-message", "applied to " + answer.cameras.length + " camera(s)");
    $("control-message").dataset.inForceFromGroup = Math.max(0, ...answer.cameras.map(c => c.in_force_from_group));
  } catch (e) { say("control-message", e.message, true); }
});

$("rig-save").addEventListener("click", async () => {
  try {
    const saved = await api("POST", "/api/rig/save", {});
    say("rig-save-message", "saved " + saved.cameras + " camera(s)' controls into " + saved.path + " (the file as it was: " + saved.backup + ")");
  } catch (e) { say("rig-save-message", e.message, true); }
});

// The socket stays open while the page is: the console pings it (the browser answers), the page sends a keepalive
// every 15 s (the console answers), and a socket that has heard nothing for 90 s is taken for dead. A lost socket is
// opened again at once; the banner shows only when the console has stayed unreachable for 5 s.
let retry = 250, bannerTimer = null;
function lost() {
  $("connection").textContent = "reconnecting…";
  if (bannerTimer === null) {
    bannerTimer = setTimeout(() => { $("banner").classList.add("shown"); $("connection").textContent = "disconnected"; }, 5000);
  }
  setTimeout(connect, retry);
  retry = Math.min(retry * 2, 5000);
}
function connect() {
  const socket = new WebSocket((location.protocol === "https:" ? "wss://" : "ws://") + location.host + "/ws");
  let heard = Date.now(), ended = false;
  const keepalive = setInterval(() => {
    if (socket.readyState !== WebSocket.OPEN) return;
    if (Date.now() - heard > 90000) { socket.close(); end(); return; }
    socket.send('{"type":"keepalive"}');
  }, 15000);
  function end() {
    if (ended) return;
    ended = true;
    clearInterval(keepalive);
    socket.onmessage = socket.onclose = null;
    lost();
  }
  socket.onopen = () => {
    retry = 250; heard = Date.now();
    clearTimeout(bannerTimer); bannerTimer = null;
    $("banner").classList.remove("shown"); $("connection").textContent = "live";
  };
  socket.onmessage = (event) => {
    heard = Date.now();
    let m;
    try { m = JSON.parse(event.data); } catch (e) { return; }
    if (m.type === "rig") showRig(m);
    else if (m.type === "multiview") showSet(m);
    else if (m.type === "take") showTake(m.take);
    else if (m.type === "takes") showTakes(m.takes);
    else if (m.type === "event") showEvent(m);
  };
  socket.onclose = end;
}
api("GET", "/api/rig").then(showRig).catch(() => {});
api("GET", "/api/takes").then((t) => { showTakes(t.takes); showTake(t.current); }).catch(() => {});
connect();
</script>
</body>
</html>
"""#
}
