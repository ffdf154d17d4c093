// rlviz timeline page: the training-step chart and the chosen checkpoint (runs after page.js: fmt, StepTrace).
const TL = DATA, ROWS = TL.checkpoints, PAD = {l: 56, r: 16, t: 14, b: 34};
const REGRESSED = new Set(TL.regressions.map(r => r.step));
const ONSETS = Object.entries(TL.first_seen).map(([id, s]) => [id, (s !== null && typeof s === "object") ? s.step : s]);

function num(row, dotted) {
  let v = row; for (const k of dotted.split(".")) v = (v && typeof v === "object") ? v[k] : undefined;
  return (typeof v === "number" && isFinite(v)) ? v : null;
}

class StepChart {
  constructor(canvas, onPick) {
    this.c = canvas; this.sel = 0; this.onPick = onPick;
    this.steps = ROWS.map(r => r.step);
    canvas.addEventListener("click", ev => this.pick(this.nearest(ev)));
    new ResizeObserver(() => this.draw()).observe(canvas);
  }
  xOf(step, W) {
    const lo = Math.min(...this.steps), hi = Math.max(...this.steps), w = W - PAD.l - PAD.r;
    return hi > lo ? PAD.l + w * (step - lo) / (hi - lo) : PAD.l + w / 2;
  }
  nearest(ev) {
    const r = this.c.getBoundingClientRect(), x = ev.clientX - r.left;
    let best = 0, d = Infinity;
    this.steps.forEach((s, i) => { const e = Math.abs(this.xOf(s, r.width) - x); if (e < d) { d = e; best = i; } });
    return best;
  }
  pick(i) { this.sel = i; this.c.dataset.selected = ROWS[i].step; this.draw(); this.onPick(i); }
  draw() {
    const c = this.c, dpr = window.devicePixelRatio || 1, W = c.clientWidth, H = c.clientHeight;
    if (!W || !H || !ROWS.length) return;
    c.width = W * dpr; c.height = H * dpr;
    const g = c.getContext("2d"); g.setTransform(dpr, 0, 0, dpr, 0, 0); g.clearRect(0, 0, W, H);
    const mean = ROWS.map(r => num(r, "return.mean")), ci = ROWS.map(r => (r.return && r.return.ci95) || [null, null]);
    const ent = ROWS.map(r => num(r, "mean_relative_entropy"));
    const vals = mean.concat(ci.flat()).filter(v => v !== null);
    let lo = Math.min(...vals), hi = Math.max(...vals); if (!(hi > lo)) { lo -= 1; hi += 1; }
    const h = H - PAD.t - PAD.b, Y = v => PAD.t + h * (1 - (v - lo) / (hi - lo)), X = s => this.xOf(s, W);
    g.font = "11px sans-serif"; g.strokeStyle = COLORS.grid; g.strokeRect(PAD.l, PAD.t, W - PAD.l - PAD.r, h);
    g.fillStyle = COLORS.text; g.fillText(fmt(hi), 4, PAD.t + 10); g.fillText(fmt(lo), 4, PAD.t + h);
    g.fillText("return", 4, PAD.t + h / 2); g.fillText("training step", W / 2 - 30, H - 4);
    this.steps.forEach((s, i) => {
      if (i !== 0 && i !== this.steps.length - 1 && i !== this.sel) return;
      const label = s.toLocaleString("en"), w = g.measureText(label).width;
      g.fillText(label, Math.min(Math.max(X(s) - w / 2, 2), W - w - 2), PAD.t + h + 14);
    });
    g.fillStyle = "rgba(90,132,200,0.35)"; g.beginPath();  // CI band
    ci.forEach((b, i) => { if (b[1] !== null) (i ? g.lineTo : g.moveTo).call(g, X(this.steps[i]), Y(b[1])); });
    for (let i = ci.length - 1; i >= 0; i--) if (ci[i][0] !== null) g.lineTo(X(this.steps[i]), Y(ci[i][0]));
    g.fill();
    g.strokeStyle = "#5ac8ff"; g.lineWidth = 2; g.beginPath();
    mean.forEach((v, i) => { if (v !== null) (i ? g.lineTo : g.moveTo).call(g, X(this.steps[i]), Y(v)); }); g.stroke();
    if (ent.some(v => v !== null)) {  // entropy H/ln|A| on [0, 1], along the bottom
      g.strokeStyle = COLORS.entropy; g.lineWidth = 1; g.setLineDash([4, 3]); g.beginPath();
      ent.forEach((v, i) => { if (v !== null) (i ? g.lineTo : g.moveTo).call(g, X(this.steps[i]), PAD.t + h * (1 - v)); });
      g.stroke(); g.setLineDash([]); g.fillStyle = COLORS.entropy; g.fillText("entropy (0..1)", W - PAD.r - 80, PAD.t + 12);
    }
    ONSETS.forEach(([id, s], k) => {  // diagnostics first seen
      if (typeof s !== "number") return;
      g.strokeStyle = "#ffb028"; g.setLineDash([5, 4]); g.beginPath(); g.moveTo(X(s), PAD.t); g.lineTo(X(s), PAD.t + h); g.stroke();
      g.setLineDash([]); g.fillStyle = "#ffb028"; g.fillText(id, X(s) + 3, PAD.t + 12 + 12 * k);
    });
    mean.forEach((v, i) => {
      if (v === null) return;
      const x = X(this.steps[i]), y = Y(v);
      g.fillStyle = REGRESSED.has(this.steps[i]) ? "#ff5050" : "#5ac8ff"; g.beginPath();
      if (REGRESSED.has(this.steps[i])) { g.moveTo(x - 7, y + 4); g.lineTo(x + 7, y + 4); g.lineTo(x, y + 14); g.fill(); g.beginPath(); }
      g.arc(x, y, i === this.sel ? 7 : 4, 0, 2 * Math.PI); g.fill();
      if (i === this.sel) { g.strokeStyle = "#ffb028"; g.lineWidth = 2; g.stroke(); }
    });
  }
}

function flat(obj, prefix, out) {
  Object.entries(obj).forEach(([k, v]) => {
    const key = prefix ? prefix + "." + k : k;
    if (v !== null && typeof v === "object" && !Array.isArray(v)) flat(v, key, out);
    else if (k !== "diagnostics") out.push([key, Array.isArray(v) ? "[" + v.map(fmt).join(", ") + "]" : fmt(v)]);
  });
  return out;
}

// the numbers shown first (in this order); the rest are under "all numbers"
const KEY = ["step", "checkpoint", "episodes", "return.mean", "return.ci95", "return.median", "return.iqm", "return.std",
             "return.min", "return.max", "lengths.mean", "failures_per_episode", "mean_relative_entropy",
             "value_explained_variance", "policy_change", "vs_best", "vs_previous"];
const rank = k => { const i = KEY.findIndex(p => k === p || k.startsWith(p + ".")); return i < 0 ? KEY.length : i; };

function fill(table, entries) {
  table.textContent = "";
  entries.forEach(([k, v]) => { const tr = table.insertRow(); const th = document.createElement("th");
    th.textContent = k; tr.appendChild(th); tr.insertCell().textContent = v; });
}

function show(i) {
  const row = ROWS[i], step = row.step;
  document.getElementById("tl-heading").textContent = "Checkpoint at training step " + step.toLocaleString("en") +
    (row.checkpoint ? " (" + row.checkpoint + ")" : "");
  const all = flat(row, "", []), main = all.filter(([k]) => KEY.some(p => k === p || k.startsWith(p + ".")));
  fill(document.getElementById("tl-numbers"), main.sort((a, b) => rank(a[0]) - rank(b[0])));
  fill(document.getElementById("tl-more"), all.filter(e => !main.includes(e)));
  const findings = document.getElementById("tl-findings"); findings.textContent = "";
  TL.regressions.filter(r => r.step === step).forEach(r => {
    const d = document.createElement("div"); d.className = "finding error";
    d.textContent = "regression: return " + fmt(r.return_diff.mean) + " vs step " + r.vs_step.toLocaleString("en") +
      " (95% CI " + (r.return_diff.ci95 || []).map(fmt).join(" .. ") + ")";
    findings.appendChild(d);
  });
  (row.diagnostics || []).forEach(f => { const d = document.createElement("div");
    d.className = "finding " + (f.severity || "info"); const b = document.createElement("b"); b.textContent = f.id;
    d.appendChild(b); d.appendChild(document.createTextNode(": " + f.message)); findings.appendChild(d); });
  const hm = document.getElementById("tl-heatmap"); hm.textContent = "";
  if (TL.heatmaps[step]) { const h = document.createElement("h3"); h.textContent = "Failure heatmap";
    const img = document.createElement("img"); img.alt = "failure heatmap at step " + step; img.src = TL.heatmaps[step];
    hm.appendChild(h); hm.appendChild(img); }
  const box = document.getElementById("tl-episode"); box.textContent = "";
  const ep = TL.episodes[step];
  if (!ep) { box.textContent = "no episode recorded for this checkpoint"; return; }
  box.className = "video"; box.dataset.step = step;
  box.innerHTML = "<div><b></b><br><video controls muted playsinline preload='auto'></video></div><div class='trace'>" +
    "<div class='trace-title'>per-step trace of this episode: value, return-to-go, entropy, action probabilities</div>" +
    "<canvas data-step='0'></canvas><div class='readout'></div></div>";
  box.querySelector("b").textContent = "seed " + ep.seed + ": return " + fmt(ep.return) + " in " + ep.length + " steps";
  box.querySelector("video").src = ep.video;
  box.trace = new StepTrace(box, ep.trace);
  document.querySelectorAll("#tl-steps button").forEach((b, j) => b.classList.toggle("sel", j === i));
}

const CHART = new StepChart(document.getElementById("tl-canvas"), show);
const buttons = document.getElementById("tl-steps");
ROWS.forEach((r, i) => { const b = document.createElement("button"); b.textContent = "step " + r.step.toLocaleString("en");
  if (REGRESSED.has(r.step)) b.className = "regression"; b.addEventListener("click", () => CHART.pick(i)); buttons.appendChild(b); });
if (ROWS.length) CHART.pick(ROWS.length - 1);
window.rlvizTimelineReady = true;
