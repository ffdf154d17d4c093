"use strict";
// rlviz explore: the run's heatmap, histograms and episodes; any episode rendered on demand (the replay of
// `--videos episode:N`) and scrubbed step by step with its per-step trace (StepTrace, from the report's page.js).
const E = {run: null, col: {}, rows: [], trace: null, tl: null, n: null, poll: null};
window.explore = E;

function el(id) { return document.getElementById(id); }
function num(v) { return v === null || v === undefined ? NaN : Number(v); }

async function getJSON(url, opts) {
  const r = await fetch(url, opts);
  const body = await r.json().catch(() => ({error: "bad answer"}));
  if (!r.ok) throw new Error(body.error || ("HTTP " + r.status));
  return body;
}

function rowTable(table, columns, rows, sortable) {
  table.textContent = "";
  const head = table.createTHead().insertRow();
  columns.forEach((c, j) => { const th = document.createElement("th"); th.textContent = c; th.dataset.col = j; head.appendChild(th); });
  const body = table.createTBody();
  const trs = rows.map(row => {
    const tr = document.createElement("tr"); tr.className = "ep";
    row.forEach(v => { tr.insertCell().textContent = fmt(v); });
    tr.dataset.episode = row[E.col.episode]; tr._row = row;
    tr.addEventListener("click", () => openEpisode(Number(tr.dataset.episode)));
    return tr;
  });
  trs.forEach(tr => body.appendChild(tr));
  if (sortable) head.addEventListener("click", ev => {
    const th = ev.target.closest("th"); if (!th) return;
    const j = Number(th.dataset.col), asc = !th.classList.contains("asc");
    head.querySelectorAll("th").forEach(h => h.classList.remove("asc", "desc"));
    th.classList.add(asc ? "asc" : "desc");
    const key = v => (v === null || v === "" ? -Infinity : (isNaN(Number(v)) ? String(v) : Number(v)));
    trs.sort((a, b) => { const x = key(a._row[j]), y = key(b._row[j]); return (x < y ? -1 : x > y ? 1 : 0) * (asc ? 1 : -1); });
    trs.forEach(tr => body.appendChild(tr));
  });
}

// -- the list of episodes a click selected ------------------------------------------------------------------
const LIST_COLUMNS = ["episode", "return", "team_return", "length", "steps", "seed", "failures", "terminated", "truncated"];
function showList(title, rows) {
  el("list-title").textContent = title + " (" + rows.length + ")";
  const cols = LIST_COLUMNS.filter(c => c in E.col);
  const sorted = rows.slice().sort((a, b) => a[E.col.episode] - b[E.col.episode]);
  rowTable(el("list"), cols, sorted.map(r => cols.map(c => r[E.col[c]])), true);
}

// -- heatmap ---------------------------------------------------------------------------------------------------
function drawHeatmap() {
  const h = E.run.heatmap, c = el("heatmap"); if (!h) { el("heat-box").hidden = true; return; }
  const [H, W] = h.shape, layer = el("layer").value, grid = layer ? h.layers[layer] : h.total;
  const scale = Math.max(1, Math.floor(320 / Math.max(H, W)));
  c.width = W * scale; c.height = H * scale; c.style.width = c.width + "px"; c.style.height = c.height + "px";
  const g = c.getContext("2d"), img = g.createImageData(W, H);
  let vmax = 1; grid.forEach(r => r.forEach(v => { if (v > vmax) vmax = v; }));
  for (let y = 0; y < H; y++) for (let x = 0; x < W; x++) {
    const i = (y * W + x) * 4, v = grid[y][x] / vmax, bg = h.background;
    const b = bg ? [bg[(y * W + x) * 3], bg[(y * W + x) * 3 + 1], bg[(y * W + x) * 3 + 2]] : [0, 0, 0];
    const heat = v > 0 ? [255 * Math.min(1, 1.6 * v), 255 * Math.max(0, 1.6 * v - 0.6), 60 * (1 - v)] : null;
    const px = heat ? heat : b.map(u => u * 0.35);
    img.data[i] = px[0]; img.data[i + 1] = px[1]; img.data[i + 2] = px[2]; img.data[i + 3] = 255;
  }
  const tmp = document.createElement("canvas"); tmp.width = W; tmp.height = H; tmp.getContext("2d").putImageData(img, 0, 0);
  g.imageSmoothingEnabled = false; g.drawImage(tmp, 0, 0, c.width, c.height);
  E.heatScale = scale;
}

async function clickCell(x, y) {
  const layer = el("layer").value;
  const q = "/api/cell?x=" + x + "&y=" + y + (layer ? "&layer=" + encodeURIComponent(layer) : "");
  const ans = await getJSON(q);
  E.cellRows = ans.episodes.map(r => ans.columns.map(c => r[c]));
  showList("Failed with " + (layer || "an object") + " at (" + x + ", " + y + ")", E.cellRows);
}

// -- histograms ------------------------------------------------------------------------------------------------
function histogram(box, column, bins) {
  const j = E.col[column]; if (j === undefined) return;
  const vals = E.rows.map(r => num(r[j])).filter(v => !isNaN(v)); if (!vals.length) return;
  const lo = Math.min(...vals), hi = Math.max(...vals), n = hi > lo ? bins : 1, w = (hi - lo) / n || 1;
  const bin = v => Math.min(n - 1, Math.floor((v - lo) / w));
  const counts = new Array(n).fill(0); vals.forEach(v => counts[bin(v)]++);
  const top = Math.max(...counts);
  counts.forEach((k, b) => {
    const bar = document.createElement("div"); bar.className = "bar"; bar.style.height = (100 * k / top) + "%";
    const a = lo + b * w, z = b === n - 1 ? hi : lo + (b + 1) * w;
    bar.title = column + " " + fmt(a) + " to " + fmt(z) + ": " + k + " episodes"; bar.dataset.bin = b;
    bar.addEventListener("click", () => {
      box.querySelectorAll(".bar.on").forEach(x => x.classList.remove("on")); bar.classList.add("on");
      showList(column + " " + fmt(a) + " to " + fmt(z), E.rows.filter(r => !isNaN(num(r[j])) && bin(num(r[j])) === b));
    });
    box.appendChild(bar);
  });
}

// -- all episodes, filtered --------------------------------------------------------------------------------------
function filterAll() {
  const f = el("f-failed").checked, t = el("f-truncated").checked;
  const lo = el("f-min").value === "" ? -Infinity : Number(el("f-min").value);
  const hi = el("f-max").value === "" ? Infinity : Number(el("f-max").value);
  const c = E.col, any = (r, name) => ["", "a_", "b_"].map(p => r[c[p + name]]);
  const ret = [c["return"], c.return_diff, c.team_return].find(j => j !== undefined);
  const rows = E.rows.filter(r => (!f || any(r, "failures").some(v => num(v) > 0)) && (!t || any(r, "truncated").includes(true))
    && !(num(r[ret]) < lo) && !(num(r[ret]) > hi));
  el("count").textContent = rows.length + " of " + E.rows.length;
  rowTable(el("all"), E.run.columns, rows, true);
}

// -- one episode: one video per side (a render run's: one; a compare run's: A and B on the same seed) --------------
// E.boxes: [{side, box, video, trace, tl}], the first is the main one (E.trace, E.tl: its StepTrace and trace).
function sides() { return (E.run.variants || [""]).filter(v => !/(^|-)plain$/.test(v)); }
function variantOf(side) {
  const plain = side ? side + "-plain" : "plain";
  return !E.salOn && (E.run.variants || []).includes(plain) ? plain : side;
}
function videoURL(n, side) { const v = variantOf(side); return "/api/episode/" + n + "/video.mp4" + (v ? "?v=" + v : ""); }
function label(side) { const m = /^step(\d+)$/.exec(side); return m ? "step " + m[1] : side.toUpperCase(); }
// (a multi-agent run's table: the team's return and the env's steps stand for the episode's return and length)
const TEAM = {return: "team_return", length: "steps"};
function col(side, name) {
  const j = E.col[side ? side + "_" + name : name];
  return j !== undefined ? j : side ? undefined : E.col[TEAM[name]];
}

function makeBoxes() {
  const first = el("viewer-box"), names = sides();
  if (E.boxes && E.boxes.length === names.length) return;
  E.boxes = names.map((side, k) => {
    let box = first;
    if (k > 0) { box = first.cloneNode(true); box.id = "viewer-box-" + side; el("sides").appendChild(box); }
    box.dataset.side = side;
    return {side, box, video: box.querySelector("video"), trace: null, tl: null};
  });
  el("sides").classList.toggle("pair", names.length > 1);
}

async function openEpisode(n) {
  if (!E.run.replayable) return;
  E.n = n; E.tl = null; clearTimeout(E.poll); makeBoxes();
  el("viewer").hidden = false; el("viewer-title").textContent = "Episode " + n;
  const row = E.rows.find(r => r[E.col.episode] === n) || [];
  E.boxes.forEach(b => { b.video.removeAttribute("src"); b.video.load(); });
  window.exploreEpisodeReady = false;
  const prog = el("progress"); prog.className = "readout";
  let st;
  try { st = await getJSON("/api/episode/" + n + "/open", {method: "POST", headers: {"Content-Type": "application/json"}, body: "{}"}); }
  catch (e) { prog.className = "readout error"; prog.textContent = "episode " + n + ": " + e.message; return; }
  const lengths = E.boxes.map(b => row[col(b.side, "length")]).filter(v => v !== undefined);
  const what = lengths.length ? " (" + lengths.join(" / ") + " steps)" : E.boxes.length > 1 ? " (" + E.boxes.length + " videos)" : "";
  while (st.state === "rendering" && E.n === n) {
    prog.innerHTML = "<span class='spinner'></span>";
    prog.appendChild(document.createTextNode("rendering episode " + n + what + ": " + (st.seconds || 0) + " s"));
    await new Promise(r => { E.poll = setTimeout(r, 250); });
    st = await getJSON("/api/episode/" + n + "/status");
  }
  if (E.n !== n) return;
  if (st.state !== "done") { prog.className = "readout error"; prog.textContent = "episode " + n + " could not be rendered: " + (st.message || st.state); return; }
  prog.textContent = "";
  const tls = await Promise.all(E.boxes.map(b => getJSON("/api/episode/" + n + "/trace" + (b.side ? "?v=" + b.side : ""))));
  if (E.n !== n) return;
  E.boxes.forEach((b, k) => { b.tl = tls[k]; });
  const tl = tls[0], T = Math.max(...tls.map(t => t.T));
  E.tl = tl; el("scrub").max = T; el("fail").disabled = tl.failure_step === null;
  const rets = E.boxes.filter(b => col(b.side, "return") !== undefined);
  const ret = rets.map(b => (b.side ? label(b.side) + " " : "") + fmt(row[col(b.side, "return")])).join(", ");
  el("viewer-title").textContent = "Episode " + n + " (" + (E.col.seed !== undefined ? "seed " + row[E.col.seed] + ", " : "") +
    (ret ? "return " + ret + ", " : "") + tls.map(t => t.T).join(" / ") + " steps" +
    (E.boxes.length === 1 && tl.failure_step !== null ? ", failed at step " + tl.failure_step : "") + ")";
  let loaded = 0;
  E.boxes.forEach((b, k) => {
    const t = b.tl;
    const r = col(b.side, "return");
    b.box.querySelector(".side-title").textContent = b.side ? label(b.side) + ": " + (r !== undefined ? "return " + fmt(row[r]) + ", " : "") +
      t.T + " steps" + (t.failure_step !== null ? ", failed at step " + t.failure_step : "") : "";
    const legend = b.box.querySelector(".legend"); legend.textContent = "";
    (t.action_names || []).forEach((name, a) => { const s = document.createElement("span"); s.style.color = PALETTE[a % PALETTE.length]; s.textContent = "\u25A0 " + name; legend.appendChild(s); });
    if (!b.trace) {
      b.trace = new StepTrace(b.box, t);
      if (k === 0) {
        const base = b.trace.setStep.bind(b.trace);
        // (its own trace's length: E.tl is null while the next episode loads, and this video still fires events)
        b.trace.setStep = s => { base(s); el("scrub").value = s; el("step").textContent = "step " + s + " / " + b.trace.tl.T; showAttention(s); };
      }
    } else { b.trace.tl = t; b.trace.t = -1; }
    b.video.addEventListener("loadeddata", () => { if (++loaded === E.boxes.length) { seek(0); window.exploreEpisodeReady = true; } }, {once: true});
    b.video.src = videoURL(n, b.side);
  });
  E.trace = E.boxes[0].trace;
}

function showAttention(t) {
  const a = E.tl && E.tl.attention, box = el("viewer-box").querySelector(".attention");
  if (!a || !Object.keys(a).length) { box.textContent = ""; return; }
  box.textContent = "attention: " + Object.entries(a).map(([k, v]) => k + " " + fmt(v[Math.min(t, v.length - 1)])).join(" \u00b7 ");
}

function seek(t) {
  if (!E.tl || !E.trace) return;
  t = Math.max(0, Math.min(Number(el("scrub").max), t));
  E.boxes.forEach(b => { if (b.trace && b.tl) { b.video.pause(); b.trace.seek(Math.min(b.tl.T, t)); } });
}
function playPause() {
  if (!E.trace) return;
  const go = E.trace.video.paused;
  // (a play() cut short by the next episode's load() rejects with an AbortError: expected, not an error)
  E.boxes.forEach(b => { if (b.trace) { if (go) b.video.play().catch(e => { if (e.name !== "AbortError") throw e; });
                                        else b.video.pause(); } });
}
// the saliency overlay on or off: each side's video swapped for its other variant, at the same step
function setSaliency(on) {
  E.salOn = on; el("saliency").checked = on;
  if (!E.trace || E.n === null) return;
  const t = E.trace.t, n = E.n; let loaded = 0;
  window.exploreEpisodeReady = false;
  E.boxes.forEach(b => {
    b.video.addEventListener("loadeddata", () => { if (++loaded === E.boxes.length && E.n === n) { seek(t); window.exploreEpisodeReady = true; } }, {once: true});
    b.video.src = videoURL(n, b.side);
  });
}
E.seek = seek; E.open = openEpisode; E.clickCell = clickCell; E.setSaliency = setSaliency; E.salOn = true;
E.failureStep = () => { if (E.tl && E.tl.failure_step !== null) seek(E.tl.failure_step); };
E.videoURL = videoURL;

// -- start -------------------------------------------------------------------------------------------------------
async function start() {
  E.run = await getJSON("/api/run");
  E.run.columns.forEach((c, j) => { E.col[c] = j; });
  E.rows = E.run.rows;
  el("title").textContent = E.run.title + " \u2014 " + (E.run.job || "run");
  const s = E.run.summary;
  el("summary").textContent = (s.episodes || E.rows.length) + " episodes" + (s.returns ? ", return mean " + fmt(s.returns.mean) : "") +
    (s.team_return ? ", team return mean " + fmt(s.team_return.mean) : "") +
    (E.run.replayable ? "" : " (episodes of a " + E.run.job + " run cannot be opened yet)");
  if (E.run.heatmap) {
    try { E.run.heatmap = await getJSON("/api/heatmap"); }
    catch (e) { E.run.heatmap = null; el("summary").textContent += " (heatmap: " + e.message + ")"; }
  }
  if (E.run.heatmap) {
    const sel = el("layer"); const all = document.createElement("option"); all.value = ""; all.textContent = "all objects"; sel.appendChild(all);
    Object.keys(E.run.heatmap.layers).forEach(n => { const o = document.createElement("option"); o.value = n; o.textContent = n; sel.appendChild(o); });
    sel.addEventListener("change", drawHeatmap);
    el("heatmap").addEventListener("click", ev => {
      const r = el("heatmap").getBoundingClientRect(), [H, W] = E.run.heatmap.shape;
      const x = Math.min(W - 1, Math.floor((ev.clientX - r.left) / r.width * W)), y = Math.min(H - 1, Math.floor((ev.clientY - r.top) / r.height * H));
      clickCell(x, y).catch(e => { el("list-title").textContent = e.message; });
    });
  }
  drawHeatmap();
  const pick = names => names.find(c => c in E.col);  // (a compare run: the return difference, A's length)
  histogram(el("hist-return"), pick(["return", "return_diff", "team_return"]) || "return", 20);
  histogram(el("hist-length"), pick(["length", "a_length", "steps"]) || "length", 20);
  ["f-failed", "f-truncated", "f-min", "f-max"].forEach(id => el(id).addEventListener("input", filterAll));
  filterAll();
  el("prev").addEventListener("click", () => E.trace && seek(E.trace.t - 1));
  el("next").addEventListener("click", () => E.trace && seek(E.trace.t + 1));
  el("fail").addEventListener("click", E.failureStep);
  el("scrub").addEventListener("input", () => seek(Number(el("scrub").value)));
  el("play").addEventListener("click", playPause);
  el("saliency-box").hidden = !(E.run.variants || []).some(v => /(^|-)plain$/.test(v));
  el("saliency").addEventListener("change", () => setSaliency(el("saliency").checked));
  document.addEventListener("keydown", ev => {
    if (!E.trace || ev.target.tagName === "INPUT" || ev.target.tagName === "SELECT") return;
    const k = ev.key, t = E.trace.t;
    if (k === "ArrowRight") seek(t + 1); else if (k === "ArrowLeft") seek(t - 1);
    else if (k === "Home") seek(0); else if (k === "End" && E.tl) seek(E.tl.T);
    else if (k === "f" || k === "F") E.failureStep();
    else if (k === " ") playPause();
    else if ((k === "s" || k === "S") && !el("saliency-box").hidden) setSaliency(!E.salOn);
    else return;
    ev.preventDefault();
  });
  window.exploreReady = true;
}
start().catch(e => { el("summary").textContent = "could not read the run: " + e.message; });
