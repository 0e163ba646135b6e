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
\#(style)</style>
</head>
<body>
<header><h1>coord console</h1><span id="rig-summary"></span><span id="connection">connecting…</span></header>
<div id="banner">console connection lost — retrying</div>
<main>
  <div>
    <section id="view">
      <div id="view-controls">
        <button id="layout-grid">Grid</button>
        <button id="layout-pip">Picture in picture</button>
        <span class="group" id="set-group"></span>
      </div>
      <div id="tiles"></div>
    </section>
    <section id="nodes-section">
      <h2>Nodes</h2>
      <div class="table-wrap"><table><thead><tr><th>node</th><th>state</th><th>pressure</th><th>clock ±µs</th><th>sound</th><th>take</th><th>message</th><th>disk free · recording left</th></tr></thead>
      <tbody id="nodes"></tbody></table></div>
      <div id="rig-disk" class="message"></div>
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
        <button id="snap" title="one still from every camera on the next group the nodes can reach">Snap</button>
        <button id="preview-train" aria-pressed="false" title="a free-running trigger pulse per preview group, so triggered cameras show frames for focusing">Trigger train: off</button>
      </div>
      <div class="row" style="margin-top:8px">
        <div><label for="snap-size">still size (WxH or max; empty: preview's)</label><input id="snap-size" placeholder="max"></div>
        <div><label for="snap-format">format</label><select id="snap-format"><option>png</option><option>tiff</option></select></div>
        <div><label for="snap-count">shots</label><input id="snap-count" type="number" min="1" max="1000" step="1" placeholder="1"></div>
        <div><label for="snap-every">every ms</label><input id="snap-every" type="number" min="1" step="1"></div>
      </div>
      <div id="take-state">no take running</div>
      <div id="take-message" class="message"></div>
      <div id="snap-message" class="message"></div>
      <div id="preview-train-message" class="message"></div>
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
      <div id="rig-save-part" hidden>
        <div class="row" style="margin-top:8px"><button id="rig-save">Save as the rig file's defaults</button></div>
        <div class="message">Writes the controls set here into the rig file this console was started with, so every take starts with them: only those values change in its text, its comments and layout stay; the file as it was is kept beside it as <code>.bak</code>.</div>
        <div id="rig-save-message" class="message"></div>
      </div>
      <div class="message"><a id="rig-file" href="api/rig/rig.yaml" download>Download a rig file with these controls</a><span id="rig-file-note"> (this console was started without one, so there is none to save into)</span>.</div>
    </section>
    <section id="takes-section">
      <h2>Takes</h2>
      <table><tbody id="takes"></tbody></table>
    </section>
    <section id="events-section">
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

// A request the console never answered (the network, or a console restarting) fails with a sentence saying so; the
// console's own refusals are its sentences. An unanswered request's error goes once the console answers again.
const unanswered = new Set();
async function api(method, path, body) {
  const options = { method, headers: {} };
  if (body !== undefined) { options.headers["Content-Type"] = "application/json"; options.body = JSON.stringify(body); }
  let response;
  try { response = await fetch(path, options); }
  catch (e) {
    const error = new Error("The console did not answer: " + (e && e.message ? e.message : String(e)) + " (it may be restarting; try again once the page says live).");
    error.unanswered = true;
    throw error;
  }
  answered();
  let data = null;
  try { data = await response.json(); } catch (e) { data = null; }
  if (!response.ok) throw new Error((data && data.error) || ("The console refused the request (HTTP " + response.status + ") without saying why."));
  return data;
}
function say(id, text, isError) { const m = $(id); m.textContent = text || ""; m.classList.toggle("error", !!isError); unanswered.delete(id); }
function sayError(id, e) { say(id, e.message, true); if (e.unanswered) unanswered.add(id); }
function answered() { for (const id of [...unanswered]) say(id, ""); }
function ago(s) { return s < 60 ? Math.round(s) + " s ago" : s < 3600 ? Math.floor(s / 60) + " min ago" : Math.floor(s / 3600) + " h ago"; }
function known(v) { return v !== null && v !== undefined; }
function gigabytes(b) { return (b / 1e9).toFixed(1) + " GB"; }
function duration(s) {
  return s >= 3600 ? Math.floor(s / 3600) + " h " + Math.floor((s % 3600) / 60) + " min" : s >= 60 ? Math.floor(s / 60) + " min" : Math.round(s) + " s";
}

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
// The node's level is the peak since its last status; -100 dBFS (or less) is no sound at all: an empty meter.
function soundCell(mics) {
  const cell = el("td", mics.length ? null : "—");
  for (const m of mics) {
    const heard = m.level_dbfs > -100;
    const meter = document.createElement("meter");
    meter.min = -60; meter.max = 0; meter.low = -20; meter.high = -6; meter.optimum = -30;
    meter.value = heard ? Math.max(-60, Math.min(0, m.level_dbfs)) : -60;
    meter.className = "mic-level" + (heard ? "" : " empty");
    meter.dataset.mic = m.mic;
    meter.title = m.mic + ": " + (m.error ? m.error : heard ? "peak " + m.level_dbfs.toFixed(1) + " dBFS" : "no signal");
    cell.append(el("span", m.mic + " "), meter,
                el("span", " " + (m.error ? "ended" : heard ? m.level_dbfs.toFixed(0) + " dB" : "no signal"), heard || m.error ? null : "no-signal"));
  }
  return cell;
}
// Disk free and how long the node records on it (at the rate its newest take wrote).
function diskText(n) {
  if (!known(n.disk_free_bytes)) return "—";
  return gigabytes(n.disk_free_bytes) + " · " + (known(n.recording_left_s) ? duration(n.recording_left_s) : "—");
}
function showRigDisk(nodes) {
  const least = (key) => nodes.filter((n) => known(n[key])).reduce((a, n) => (a && a[key] <= n[key] ? a : n), null);
  const disk = least("disk_free_bytes"), left = least("recording_left_s");
  $("rig-disk").textContent = !disk ? "" : "rig: least disk free " + gigabytes(disk.disk_free_bytes) + " (" + disk.name + ")" +
    (left ? " · least recording left " + duration(left.recording_left_s) + " (" + left.name + ")" : " · recording left known once a take has run");
}

// ---- rig ----
function showRig(rig) {
  state.rig = rig;
  const body = $("nodes");
  body.replaceChildren();
  for (const n of rig.nodes) {
    const row = el("tr", null, n.reachable ? "" : "unreachable");
    row.dataset.node = n.name;
    // A lost node's pressure and clock are as it last said them: greyed, with their age.
    const heard = known(n.last_heard_s), stale = n.reachable ? "" : "stale";
    const pressure = el("td", n.reachable || heard ? n.pressure : "—", "pressure-" + n.pressure + " " + stale);
    const clock = el("td", !known(n.clock_uncertainty_us) || (!n.reachable && !heard) ? "—" : n.clock_uncertainty_us, stale);
    if (!n.reachable && heard) pressure.title = clock.title = "as last heard, " + ago(n.last_heard_s);
    row.append(el("td", n.name), el("td", n.state + (!n.reachable && heard ? " · last heard " + ago(n.last_heard_s) : "")), pressure, clock,
               soundCell(n.mics || []), el("td", n.take_id || ""), el("td", n.message || ""), el("td", diskText(n), "disk"));
    body.appendChild(row);
  }
  showRigDisk(rig.nodes);
  // Saving into the rig file needs one: a demo's console has none to save into.
  $("rig-save-part").hidden = !rig.rig_file;
  $("rig-file-note").hidden = !!rig.rig_file;
  const train = rig.preview_train || { on: false, nodes: [] };
  $("preview-train").setAttribute("aria-pressed", String(train.on));
  $("preview-train").textContent = "Trigger train: " + (train.on ? "on" + (train.nodes.length ? " (" + train.nodes.join(", ") + ")" : ", waiting for the preview") : "off");
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
let leadTimer = null, lead = null;
function showTake(take) {
  state.take = take;
  clearInterval(leadTimer); leadTimer = null;
  const running = take && RUNNING_TAKE.includes(take.state);
  $("take-start").disabled = !!running;
  $("take-stop").disabled = !(take && take.state === "recording");
  if (!take) { $("take-state").textContent = "no take running"; say("take-message", ""); return; }
  const who = (take.take_id || take.name) + ": ";
  if (take.state === "starting" && known(take.starts_in_s)) {
    // The arming lead, counted down here between the console's updates; each update is late by its delivery, so
    // the earliest group-0 instant any of them gives is the best, and the count never goes up.
    let at = performance.now() + take.starts_in_s * 1000;
    if (lead && lead.id === who) at = Math.min(at, lead.at);
    lead = {id: who, at: at};
    const tick = () => { $("take-state").textContent = who + "starting · group 0 in " + Math.max(0, (at - performance.now()) / 1000).toFixed(1) + " s"; };
    tick();
    leadTimer = setInterval(tick, 100);
  } else {
    const elapsed = take.elapsed_s ? take.elapsed_s.toFixed(1) + " s" : "";
    const of = take.seconds ? " of " + take.seconds + " s" : "";
    $("take-state").textContent = who + take.state + (elapsed ? " · " + elapsed + of : "");
  }
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
  catch (e) { sayError("take-message", e); }
});
$("take-stop").addEventListener("click", async () => {
  try { showTake(await api("POST", "/api/takes/stop", {})); } catch (e) { sayError("take-message", e); }
});
$("snap").addEventListener("click", async () => {
  // The click's own time, so the console counts the shot's latency from here (its clock is this page's).
  const body = { clicked_at_ms: Date.now() };
  const name = $("take-name").value.trim();
  if (name) body.name = name;
  // The still's size, format and a burst, as coord snap takes them; the console refuses bad ones in a sentence.
  const size = $("snap-size").value.trim(), count = $("snap-count").value.trim(), every = $("snap-every").value.trim();
  if (size) body.size = size;
  body.format = $("snap-format").value;
  if (count) body.count = Number(count);
  if (every) body.every = Number(every);
  $("snap-message").dataset.clickedAtMs = body.clicked_at_ms;
  say("snap-message", "snapping…");
  try {
    const shot = await api("POST", "/api/snap", body);
    const groups = shot.groups && shot.groups.length > 1 ? shot.groups.length + " shots at groups " + shot.groups.join(", ") : "group " + shot.group;
    const switched = shot.switched && shot.switched.length ? "; " + shot.switched.join(", ") + " switched to the still's mode (" + (shot.switch_lead_us / 1000).toFixed(0) + " ms more lead)" : "";
    say("snap-message", shot.directory + ": " + shot.stills + " still(s), " + groups + ", " + (shot.latency_us / 1000).toFixed(1) + " ms after the " + shot.latency_from + " (" + shot.status + ")" + switched + (shot.message ? " — " + shot.message : ""));
    $("snap-message").dataset.shot = JSON.stringify(shot);
  } catch (e) { sayError("snap-message", e); }
});
$("control-apply").addEventListener("click", async () => {
  const [node, camera] = $("control-camera").value.split("/");
  try {
    const answer = await api("PUT", "/api/cameras/" + encodeURIComponent(node) + "/" + encodeURIComponent(camera) + "/controls", controlBody());
    say("control-message", node + "/" + camera + ": " + describeControls(answer.controls));
    $("control-message").dataset.inForceFromGroup = answer.in_force_from_group;
  } catch (e) { sayError("control-message", e); }
});
$("control-apply-all").addEventListener("click", async () => {
  try {
    const answer = await api("PUT", "/api/controls", controlBody());
    say("control-message", "applied to " + answer.cameras.length + " camera(s)");
    $("control-message").dataset.inForceFromGroup = Math.max(0, ...answer.cameras.map(c => c.in_force_from_group));
  } catch (e) { sayError("control-message", e); }
});

$("preview-train").addEventListener("click", async () => {
  const on = $("preview-train").getAttribute("aria-pressed") !== "true";
  try {
    const train = await api("PUT", "/api/triggers/preview", { on });
    say("preview-train-message", on ? "trigger train runs on " + train.nodes.join(", ") : "trigger train off");
  } catch (e) { sayError("preview-train-message", e); }
});

$("rig-save").addEventListener("click", async () => {
  try {
    const saved = await api("POST", "/api/rig/save", {});
    say("rig-save-message", "saved " + saved.cameras + " camera(s)' controls into " + saved.path + " (the file as it was: " + saved.backup + ")");
  } catch (e) { sayError("rig-save-message", e); }
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
    answered();
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
