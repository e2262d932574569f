// The page of `udf-host serve`: a dataset's pattern and virtual image side by side, a
// detector dragged on the pattern, frames picked on the scan, centre of mass, plugins;
// or a live source's acquisitions (the "live" lane: pattern and scan image as frames
// arrive). Every result is computed by the server's library calls and arrives as it merges.

import { Connection } from "./connection.js";
import { ImageView, outline } from "./views.js";

const $ = (id) => document.getElementById(id);

async function api(path) {
  const response = await fetch(path);
  const body = await response.json();
  if (!response.ok) throw new Error(body.error || response.statusText);
  return body;
}

const state = {
  dataset: null,
  info: null,
  nextId: 1,
  detector: { kind: "ring", cx: 0, cy: 0, ri: 0, ro: 1 },
  /** The scan positions picked: {kind: "frame", y, x} or {kind: "region", y0, y1, x0, x1}. */
  pick: null,
  /** The id of the newest request per lane; older results are ignored. */
  requests: {},
  /** The newest results per lane: {id, done, merged, total, elapsed_ms, buffers: {name: buffer}}. */
  results: {},
  /** Detector requests sent on mouse release: times in ms after the release. */
  latency: [],
  plugin: null,
  /** The live source the server offers ({path, nav_shape, ...}), if any. */
  live: null,
  /** Whether the chosen dataset is the live source. */
  isLive: false,
  /** Where the newest acquisition stands: waiting, receiving, complete, ended, stopped, failed. */
  liveState: null,
  /** A detector or statistic changed while frames came: it applies to the next acquisition. */
  livePending: false,
  /** The last few acquisitions that ended: {id, buffers} (the newest last). */
  acquired: [],
};

const views = {
  pattern: new ImageView($("pattern-view")),
  scan: new ImageView($("scan-view")),
  frame: new ImageView($("frame-view")),
  com: new ImageView($("com-view")),
  plugin: new ImageView($("plugin-view")),
};

const connection = new Connection(`ws://${location.host}/api/ws`);
window.udfHost = { state, views, ready: false, detectorAnalysis };

function showError(message) {
  const element = $("error");
  element.textContent = message;
  element.hidden = !message;
}

connection.on("status", (text) => ($("status").textContent = text));
connection.on("error", (message) => {
  if (message.id && state.requests[message.lane] !== message.id) return;
  showError(`${message.lane || "request"}: ${message.message}`);
});

/** The parts of the live lane's results: the pattern (sig) and the scan image (nav). */
function liveParts(buffers) {
  const find = (kind) => Object.values(buffers).find((b) => b.kind === kind && b.images.length > 0);
  return { pattern: find("sig"), scan: find("nav") };
}

/** Send a run request for `lane`; its id. */
function run(lane, analysis) {
  const id = state.nextId++;
  state.requests[lane] = id;
  connection.send({ type: "run", lane, id, dataset: state.dataset, analysis });
  return id;
}

// ---- results ------------------------------------------------------------------------

connection.on("result", ({ header, part, typed }) => {
  if (header.id !== state.requests[header.lane]) return;
  let buffers = {};
  for (const b of header.buffers) {
    const key = header.lane === "live" ? `${b.udf}.${b.name}` : b.name;
    buffers[key] = { ...b, values: typed(b.dtype, b.data), valid: part(b.valid), pngs: b.images.map((i) => part(i.png)) };
  }
  if (header.lane === "live") buffers = liveParts(buffers);
  const result = { id: header.id, done: header.done, merged: header.merged, total: header.total, elapsed_ms: header.elapsed_ms, buffers };
  state.results[header.lane] = result;
  if (header.lane === "live" && header.done) state.acquired = [...state.acquired.slice(-4), result];
  if (header.lane === "detector") {
    const entry = state.latency.find((l) => l.id === header.id);
    if (entry) {
      const now = performance.now() - entry.release;
      entry.first ??= now;
      entry.first_server_ms ??= header.elapsed_ms;
      if (header.done) {
        entry.done = now;
        entry.done_server_ms = header.elapsed_ms;
        entry.process_seconds = header.process_seconds;
      }
    }
  }
  showError("");
  render(header.lane);
});

/** The image of `buffer` (its first), drawn in `view`; the meta line under it. */
function showBuffer(view, buffer, result, meta) {
  if (!buffer || buffer.images.length === 0) return;
  const image = buffer.images[0];
  const shape = buffer.shape;
  // Images are the last two axes of sig and single buffers, the first two of nav buffers.
  const [height, width] = buffer.kind === "nav" ? shape.slice(0, 2) : shape.slice(-2);
  view.show(buffer.pngs[0], height, width);
  const range = image.range ? `${format(image.range[0])} – ${format(image.range[1])} (${image.scale})` : "no valid value yet";
  const progress = result.done ? "complete" : `${result.merged}/${result.total} partitions`;
  meta.textContent = `${buffer.udf}.${buffer.name}: ${progress}, ${Math.round(result.elapsed_ms)} ms; ${range}`;
}

function format(value) {
  if (value === 0) return "0";
  const magnitude = Math.abs(value);
  return magnitude >= 1e4 || magnitude < 1e-2 ? value.toExponential(2) : value.toPrecision(4);
}

function firstImageBuffer(result) {
  return Object.values(result.buffers).find((b) => b.images.length > 0);
}

function render(lane) {
  const result = state.results[lane];
  if (!result) return;
  switch (lane) {
    case "pattern":
      showBuffer(views.pattern, firstImageBuffer(result), result, $("pattern-meta"));
      break;
    case "detector":
      showBuffer(views.scan, firstImageBuffer(result), result, $("scan-meta"));
      break;
    case "frame":
      showBuffer(views.frame, firstImageBuffer(result), result, $("frame-meta"));
      break;
    case "com":
      showBuffer(views.com, result.buffers[$("com-buffer").value], result, $("com-meta"));
      break;
    case "live":
      showBuffer(views.pattern, result.buffers.pattern, result, $("pattern-meta"));
      showBuffer(views.scan, result.buffers.scan, result, $("scan-meta"));
      break;
    case "plugin": {
      const select = $("plugin-buffer");
      const names = Object.values(result.buffers).filter((b) => b.images.length > 0).map((b) => b.name);
      if ([...select.options].map((o) => o.value).join() !== names.join()) {
        select.replaceChildren(...names.map((n) => new Option(n, n)));
      }
      select.hidden = names.length < 2;
      showBuffer(views.plugin, result.buffers[select.value], result, $("plugin-meta"));
      break;
    }
  }
}

$("com-buffer").addEventListener("change", () => render("com"));
$("plugin-buffer").addEventListener("change", () => render("plugin"));

// ---- the detector on the pattern ----------------------------------------------------

function detectorAnalysis() {
  const d = state.detector;
  switch (d.kind) {
    case "ring":
      return { kind: "ring", cx: d.cx, cy: d.cy, ri: d.ri, ro: d.ro };
    case "disk":
      return { kind: "disk", cx: d.cx, cy: d.cy, r: d.ro };
    case "point":
      return { kind: "point", cx: d.cx, cy: d.cy };
    default: {
      const clamp = (v, n) => Math.min(Math.max(Math.round(v), 0), n);
      const [height, width] = state.info.sig_shape;
      return {
        kind: "rectangle",
        y0: clamp(d.cy - d.ro, height), y1: clamp(d.cy + d.ro, height),
        x0: clamp(d.cx - d.ro, width), x1: clamp(d.cx + d.ro, width),
      };
    }
  }
}

function describeDetector() {
  const a = detectorAnalysis();
  const f = (v) => (Math.round(v * 10) / 10).toString();
  const text = Object.entries(a).filter(([k]) => k !== "kind").map(([k, v]) => `${k}=${f(v)}`).join(" ");
  $("detector-numbers").textContent = text;
}

views.pattern.drawOverlay = (context, scale) => {
  const d = state.detector;
  const [x, y] = [d.cx * scale, d.cy * scale];
  outline(context, () => {
    context.beginPath();
    if (d.kind === "point") {
      context.moveTo(x - 8, y); context.lineTo(x + 8, y);
      context.moveTo(x, y - 8); context.lineTo(x, y + 8);
    } else if (d.kind === "rectangle") {
      const a = detectorAnalysis();
      context.rect(a.x0 * scale, a.y0 * scale, (a.x1 - a.x0) * scale, (a.y1 - a.y0) * scale);
    } else {
      context.arc(x, y, d.ro * scale, 0, 2 * Math.PI);
      if (d.kind === "ring") {
        context.moveTo(x + d.ri * scale, y);
        context.arc(x, y, d.ri * scale, 0, 2 * Math.PI);
      }
    }
  });
};

let grab = null;
let sendScheduled = false;

/** Send the detector at most once per animation frame while it is dragged. */
function scheduleDetector() {
  if (sendScheduled) return;
  sendScheduled = true;
  requestAnimationFrame(() => {
    sendScheduled = false;
    if (grab && !state.isLive) run("detector", detectorAnalysis());
  });
}

views.pattern.onPointer({
  down(p) {
    const d = state.detector;
    const tolerance = 5 / views.pattern.scale;
    const distance = d.kind === "rectangle"
      ? Math.max(Math.abs(p.x - d.cx), Math.abs(p.y - d.cy))
      : Math.hypot(p.x - d.cx, p.y - d.cy);
    if (d.kind !== "point" && Math.abs(distance - d.ro) < tolerance) grab = { edge: "ro" };
    else if (d.kind === "ring" && Math.abs(distance - d.ri) < tolerance) grab = { edge: "ri" };
    else if (d.kind !== "point" && distance < d.ro) grab = { dx: p.x - d.cx, dy: p.y - d.cy };
    else grab = { dx: 0, dy: 0 };
    this.move(p);
  },
  move(p) {
    const d = state.detector;
    if (!grab) return;
    if (grab.edge) {
      const distance = d.kind === "rectangle"
        ? Math.max(Math.abs(p.x - d.cx), Math.abs(p.y - d.cy))
        : Math.hypot(p.x - d.cx, p.y - d.cy);
      if (grab.edge === "ro") d.ro = Math.max(distance, d.kind === "ring" ? d.ri + 0.5 : 0.5);
      else d.ri = Math.min(Math.max(distance, 0), d.ro - 0.5);
    } else {
      d.cx = p.x - grab.dx;
      d.cy = p.y - grab.dy;
    }
    views.pattern.redraw();
    describeDetector();
    scheduleDetector();
  },
  up(p) {
    this.move(p);
    grab = null;
    if (state.isLive) return liveChanged();
    const release = performance.now();
    const id = run("detector", detectorAnalysis());
    state.latency.push({ id, release, first: null, done: null });
  },
});

$("detector-kind").addEventListener("change", (event) => {
  state.detector.kind = event.target.value;
  views.pattern.redraw();
  describeDetector();
  if (state.isLive) liveChanged();
  else run("detector", detectorAnalysis());
});

$("pattern-stat").addEventListener("change", () => {
  if (state.isLive) liveChanged();
  else run("pattern", { kind: "pattern", stat: $("pattern-stat").value });
});

// ---- picking on the scan ------------------------------------------------------------

views.scan.drawOverlay = (context, scale) => {
  const p = state.pick;
  if (!p) return;
  outline(context, () => {
    context.beginPath();
    if (p.kind === "frame") context.rect(p.x * scale, p.y * scale, scale, scale);
    else context.rect(p.x0 * scale, p.y0 * scale, (p.x1 - p.x0) * scale, (p.y1 - p.y0) * scale);
  });
};

let pickStart = null;

function scanPick(a, b) {
  const [height, width] = state.info.nav_shape.length === 1 ? [1, state.info.nav_shape[0]] : state.info.nav_shape;
  const clamp = (v, n) => Math.min(Math.max(Math.floor(v), 0), n - 1);
  const [ya, yb] = [clamp(a.y, height), clamp(b.y, height)].sort((m, n) => m - n);
  const [xa, xb] = [clamp(a.x, width), clamp(b.x, width)].sort((m, n) => m - n);
  if (ya === yb && xa === xb) return { kind: "frame", y: ya, x: xa };
  return { kind: "region", y0: ya, y1: yb + 1, x0: xa, x1: xb + 1 };
}

/** What a panel that runs on files says on the live source. */
function fileOnly(what) {
  showError(`${what} runs on files: the frames of a live acquisition are not kept (record the scan, then open the file)`);
}

views.scan.onPointer({
  down(p) {
    if (state.isLive) return fileOnly("picking frames");
    pickStart = p;
    state.pick = scanPick(p, p);
    views.scan.redraw();
  },
  move(p) {
    if (!pickStart) return;
    if (state.isLive) return;
    state.pick = scanPick(pickStart, p);
    views.scan.redraw();
  },
  up(p) {
    if (state.isLive || !pickStart) return;
    state.pick = scanPick(pickStart, p);
    pickStart = null;
    views.scan.redraw();
    const pick = state.pick;
    $("frame-title").textContent = pick.kind === "frame"
      ? `Frame at y=${pick.y}, x=${pick.x}`
      : `Sum of scan rows ${pick.y0}..${pick.y1}, columns ${pick.x0}..${pick.x1}`;
    run("frame", pick);
  },
  hover(p) {
    const result = state.results[state.isLive ? "live" : "detector"];
    const buffer = result && (state.isLive ? result.buffers.scan : firstImageBuffer(result));
    if (!buffer) return;
    const [y, x] = [Math.floor(p.y), Math.floor(p.x)];
    const [height, width] = buffer.shape;
    if (y < 0 || x < 0 || y >= height || x >= width) return;
    const i = y * width + x;
    const value = buffer.valid[i] ? format(Number(buffer.values[i])) : "not computed yet";
    $("scan-meta").dataset.hover = `(${y}, ${x}) ${value}`;
    $("scan-meta").title = `(${y}, ${x}) ${value}`;
  },
});

// ---- centre of mass -----------------------------------------------------------------

$("com-run").addEventListener("click", () => {
  if (state.isLive) return fileOnly("the centre of mass");
  const d = state.detector;
  run("com", { kind: "com", cx: d.cx, cy: d.cy, r: d.ro, ri: d.kind === "ring" ? d.ri : 0 });
});

// ---- plugins ------------------------------------------------------------------------

async function choosePlugin(path) {
  const form = $("plugin-form");
  form.replaceChildren();
  state.plugin = null;
  if (!path) return;
  try {
    const plugin = await api(`api/plugin?path=${encodeURIComponent(path)}`);
    state.plugin = plugin;
    $("plugin-summary").textContent = `${plugin.name} ${plugin.version}: ${plugin.summary}`;
    for (const p of plugin.params) {
      const label = document.createElement("label");
      const input = document.createElement("input");
      input.name = p.name;
      input.placeholder = p.default === null ? "required" : JSON.stringify(p.default);
      const doc = document.createElement("span");
      doc.className = "doc";
      doc.textContent = ` (${p.type}) ${p.doc}`;
      label.append(`${p.name} `, input, doc);
      form.append(label);
    }
    const button = document.createElement("button");
    button.textContent = "run";
    form.append(button);
  } catch (error) {
    showError(error.message);
  }
}

$("plugin").addEventListener("change", (event) => choosePlugin(event.target.value));
$("plugin-form").addEventListener("submit", (event) => {
  event.preventDefault();
  if (state.isLive) return fileOnly("a plugin");
  if (!state.plugin) return;
  const params = {};
  for (const input of event.target.querySelectorAll("input")) params[input.name] = input.value;
  run("plugin", { kind: "plugin", path: state.plugin.path, params });
});

// ---- export -------------------------------------------------------------------------

for (const panel of ["detector", "frame", "com", "plugin"]) {
  $(`${panel}-export`).addEventListener("click", () => {
    const lane = panel === "detector" && state.isLive ? "live" : panel;
    connection.send({ type: "export", lane, id: state.nextId++ });
  });
}

const TYPES = { npy: "application/octet-stream", png: "image/png", html: "text/html" };

connection.on("export", ({ header, part }) => {
  const list = $("export-list");
  list.replaceChildren();
  for (const file of header.files) {
    const type = TYPES[file.name.split(".").pop()] || "application/octet-stream";
    const link = document.createElement("a");
    link.href = URL.createObjectURL(new Blob([part(file.part)], { type }));
    link.download = `${header.lane}-${file.name.replaceAll("/", "-")}`;
    link.textContent = file.name;
    const item = document.createElement("li");
    item.append(link);
    list.append(item);
  }
  $("exports").hidden = false;
  state.exported = header;
});

// ---- datasets -----------------------------------------------------------------------

function showInfo(info) {
  const rows = info.live ? [
    ["source", info.path], ["format", info.format], ["nav shape", info.nav_shape.join(" × ")],
    ["sig shape", info.sig_shape ? info.sig_shape.join(" × ") : "known once an acquisition starts"],
    ["dtype", info.dtype_name || "known once an acquisition starts"], ["frames", info.frames],
    ...Object.entries(info.details),
  ] : [
    ["path", info.path], ["format", info.format],
    ["nav shape", info.nav_shape.join(" × ")], ["sig shape", info.sig_shape.join(" × ")],
    ["dtype", info.dtype_name], ["size", `${(info.bytes / 1e6).toFixed(1)} MB (${info.frames} frames)`],
    ["partitions", `${info.serve_partitions} here on ${info.threads} threads (udf-host run: ${info.partitions.count})`],
    ...Object.entries(info.details),
  ];
  $("info-table").replaceChildren(...rows.map(([key, value]) => {
    const row = document.createElement("tr");
    const th = document.createElement("th");
    th.textContent = key;
    const td = document.createElement("td");
    td.textContent = value;
    row.append(th, td);
    return row;
  }));
}

// ---- the live source -----------------------------------------------------------------

/** What the note under the pattern says, for a file and for the live source. */
const NOTES = {
  file: "Drag the detector to move it, its edge to resize it; the virtual image follows.",
  live: "Drag the detector to move it, its edge to resize it; the next acquisition's scan image uses it " +
    "(a scan under way goes on with the detector it started with).",
};

const LIVE_STATES = {
  waiting: (m) => `waiting for an acquisition on ${m.source}…`,
  receiving: (m) => `receiving from ${m.source}`,
  complete: (m) => `acquisition complete (${m.frames_received} frames)`,
  ended: (m) => `the scan ended early after ${m.frames_received} frames`,
  stopped: () => "stopped",
  failed: () => "failed (see above)",
};

/** Size the pattern view for frames of `sig` and put the detector in their middle. */
function setPattern(sig) {
  const [sy, sx] = sig.length === 2 ? sig : [1, sig[0]];
  const side = Math.min(sy, sx);
  Object.assign(state.detector, { cx: sx / 2, cy: sy / 2, ri: side / 8, ro: side / 4 });
  views.pattern.setShape(sy, sx);
  describeDetector();
}

/** Wait for the detector's next acquisition and show it as it comes: the pattern and the
 * scan image of the detector drawn on the pattern, or of each frame's sum while the
 * frame shape is not known yet (before the first acquisition). */
function acquire() {
  state.livePending = false;
  state.liveState = "waiting";
  const detector = state.info.sig_shape ? detectorAnalysis() : null;
  run("live", { kind: "live", stat: $("pattern-stat").value, detector });
}

/** The detector or the statistic changed on the live source: a scan whose frames are
 * coming is not thrown away; the change applies to the next acquisition. */
function liveChanged() {
  if (state.liveState === "receiving") {
    state.livePending = true;
    $("live-status").textContent = "receiving; the new detector applies to the next acquisition";
  } else {
    acquire();
  }
}

connection.on("live", (message) => {
  if (message.id !== state.requests.live) return;
  state.liveState = message.state;
  if (message.sig_shape && !state.info?.sig_shape && state.isLive) {
    state.info.sig_shape = message.sig_shape;
    setPattern(message.sig_shape);
  }
  let text = (LIVE_STATES[message.state] || (() => message.state))(message);
  if (state.livePending && message.state === "receiving") text += "; the new detector applies to the next acquisition";
  $("live-status").textContent = text;
  // A change made while frames came: the next acquisition has it.
  if (state.livePending && ["complete", "ended"].includes(message.state)) acquire();
});

$("live-acquire").addEventListener("click", acquire);
$("live-stop").addEventListener("click", () => connection.send({ type: "stop", lane: "live", id: state.requests.live || 0 }));

/** Stop `lanes`' runs in flight and drop their results still coming (another dataset
 * was chosen). */
function leave(lanes) {
  for (const lane of lanes) {
    if (state.requests[lane]) connection.send({ type: "stop", lane, id: state.requests[lane] });
    delete state.requests[lane];
  }
}

/** Open the live source: its views, and (with `start`) an acquisition. */
async function openLive(start) {
  const info = await api(`api/info?path=${encodeURIComponent(state.live.path)}`);
  leave(["pattern", "detector", "frame"]);
  state.dataset = info.path;
  state.info = info;
  state.isLive = true;
  state.results = {};
  state.pick = null;
  state.liveState = null;
  $("live-controls").hidden = false;
  $("pattern-note").textContent = NOTES.live;
  $("live-status").textContent = start ? "" : "press acquire to wait for the next acquisition";
  showInfo(info);
  const nav = info.nav_shape.length === 1 ? [1, info.nav_shape[0]] : info.nav_shape;
  views.scan.setShape(nav[0], nav[1]);
  if (info.sig_shape) setPattern(info.sig_shape);
  if (start) acquire();
  showError("");
}

async function openDataset(path) {
  try {
    if (state.live && path === state.live.path) return await openLive(true);
    if (state.isLive) leave(["live"]);
    state.isLive = false;
    $("live-controls").hidden = true;
    $("pattern-note").textContent = NOTES.file;
    const info = await api(`api/info?path=${encodeURIComponent(path)}`);
    state.dataset = path;
    state.info = info;
    showInfo(info);
    const [sy, sx] = info.sig_shape.length === 2 ? info.sig_shape : [1, info.sig_shape[0]];
    const nav = info.nav_shape.length === 1 ? [1, info.nav_shape[0]] : info.nav_shape;
    const side = Math.min(sy, sx);
    Object.assign(state.detector, { cx: sx / 2, cy: sy / 2, ri: side / 8, ro: side / 4 });
    state.pick = null;
    state.results = {};
    views.pattern.setShape(sy, sx);
    views.scan.setShape(nav[0], nav[1]);
    describeDetector();
    run("pattern", { kind: "pattern", stat: $("pattern-stat").value });
    run("detector", detectorAnalysis());
    showError("");
  } catch (error) {
    showError(error.message);
  }
}

$("dataset").addEventListener("change", (event) => openDataset(event.target.value));

/** Fill `select` with `options`, keeping what was chosen if it is still there. */
function fillSelect(select, options) {
  const chosen = select.value;
  select.replaceChildren(...options);
  if (options.some((o) => o.value === chosen)) select.value = chosen;
}

/** Read the folder listing (again): files added under the root since appear. */
async function refreshListing() {
  const listing = await api("api/datasets");
  state.live = listing.live;
  const live = listing.live ? [new Option(`live: ${listing.live.path} (${listing.live.nav_shape.join(" × ")})`, listing.live.path)] : [];
  fillSelect($("dataset"), [...live, ...listing.datasets.map((d) => new Option(`${d.path} (${(d.bytes / 1e6).toFixed(1)} MB)`, d.path))]);
  fillSelect($("plugin"), [new Option("—", ""), ...listing.plugins.map((p) => new Option(p.path, p.path))]);
  state.listing = listing;
  return listing;
}

// The listing is read again when a list gets the focus, when the window does (back from
// copying files), and by the button.
const refresh = () => refreshListing().catch((error) => showError(error.message));
for (const id of ["dataset", "plugin"]) $(id).addEventListener("focus", refresh);
window.addEventListener("focus", refresh);
$("refresh").addEventListener("click", refresh);

async function start() {
  try {
    const listing = await refreshListing();
    // A live source is not started by opening the page (with --api that would start the
    // detector): it waits for a choice or the acquire button.
    if (listing.datasets.length > 0) {
      $("dataset").value = listing.datasets[0].path;
      await openDataset(listing.datasets[0].path);
    } else if (listing.live) await openLive(false);
    else showError(`no datasets under ${listing.root}`);
  } catch (error) {
    showError(error.message);
  }
  window.udfHost.ready = true;
}

start();
