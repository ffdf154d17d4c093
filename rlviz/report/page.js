"use strict";
// rlviz report: sortable episode tables and videos with their per-step traces (plain JS, no network).
const DATA = JSON.parse(document.getElementById("rlviz-data").textContent);
const COLORS = {value: "#5ac8ff", rtg: "#ff78c8", entropy: "#b48cff", reward: "#78e678", head: "#c8c8c8",
                grid: "#464a56", text: "#8c92a0"};
const PALETTE = ["#5c84c8", "#ffb028", "#78e678", "#ff78c8", "#b48cff", "#5ac8ff", "#ff5050", "#c8c864"];

function fmt(v) {
  if (v === null || v === undefined || v === "") return "";
  const n = Number(v);
  if (typeof v === "boolean" || isNaN(n)) return String(v);
  return Number.isInteger(n) ? String(n) : n.toPrecision(4);
}

function buildTable(run, r) {
  const box = document.getElementById("episodes-" + r);
  if (!box || !run.columns.length) return;
  const withVideo = {};
  run.videos.forEach((v, i) => { if (v.episode >= 0) withVideo[v.episode] = "video-" + r + "-" + i; });
  const epCol = run.columns.indexOf("episode");
  const table = document.createElement("table");
  const head = table.createTHead().insertRow();
  run.columns.forEach((c, j) => {
    const th = document.createElement("th"); th.textContent = c; th.dataset.col = j; head.appendChild(th);
  });
  const body = table.createTBody();
  const rows = run.rows.map(row => {
    const tr = document.createElement("tr");
    row.forEach(v => { tr.insertCell().textContent = fmt(v); });
    const id = withVideo[row[epCol]];
    if (id !== undefined) {
      tr.className = "has-video"; tr.title = "open this episode's video";
      tr.addEventListener("click", () => openVideo(id));
    }
    tr._row = row; return tr;
  });
  rows.forEach(tr => body.appendChild(tr));
  head.addEventListener("click", ev => {
    const th = ev.target.closest("th"); if (!th) return;
    const j = Number(th.dataset.col), asc = !th.classList.contains("asc");
    head.querySelectorAll("th").forEach(h => h.classList.remove("asc", "desc"));
    th.classList.add(asc ? "asc" : "desc");
    const key = v => (v === null || v === "" ? -Infinity : (isNaN(Number(v)) ? String(v) : Number(v)));
    rows.sort((a, b) => { const x = key(a._row[j]), y = key(b._row[j]); return (x < y ? -1 : x > y ? 1 : 0) * (asc ? 1 : -1); });
    rows.forEach(tr => body.appendChild(tr));
  });
  box.appendChild(table);
}

function openVideo(id) {
  const box = document.getElementById(id);
  document.querySelectorAll(".video.focus").forEach(b => b.classList.remove("focus"));
  box.classList.add("focus"); box.scrollIntoView({block: "center"});
  const video = box.querySelector("video"); video.currentTime = 0; video.play().catch(() => {});
}

class StepTrace {
  constructor(box, tl) {
    this.tl = tl; this.video = box.querySelector("video"); this.canvas = box.querySelector("canvas");
    this.readout = box.querySelector(".readout"); this.t = 0; this.pad = 36;
    this.canvas.addEventListener("click", ev => this.seek(this.stepAt(ev)));
    this.canvas.addEventListener("mousemove", ev => this.show(this.stepAt(ev)));
    const follow = () => { this.follow(); if (!this.video.paused) requestAnimationFrame(follow); };
    this.video.addEventListener("play", () => requestAnimationFrame(follow));
    ["timeupdate", "seeked", "loadeddata"].forEach(e => this.video.addEventListener(e, () => this.follow()));
    new ResizeObserver(() => this.draw()).observe(this.canvas);
  }
  stepAt(ev) {
    const r = this.canvas.getBoundingClientRect(), w = r.width - this.pad - 8;
    const f = Math.min(Math.max((ev.clientX - r.left - this.pad) / w, 0), 1);
    return Math.round(f * this.tl.T);
  }
  seek(t) { this.video.currentTime = (t + 0.5) / this.tl.fps; this.setStep(t); }
  follow() { this.setStep(Math.min(this.tl.T, Math.floor(this.video.currentTime * this.tl.fps + 1e-6))); }
  setStep(t) { if (t !== this.t) { this.t = t; this.canvas.dataset.step = t; this.draw(); this.show(t); } }
  show(t) {
    const tl = this.tl, i = Math.min(Math.floor(t / tl.stride), (tl.entropy || []).length - 1);
    if (i < 0 || !tl.entropy) { this.readout.textContent = "step " + t; return; }
    const parts = ["step " + t];
    if (tl.value) parts.push("value " + fmt(tl.value[i]));
    parts.push("return-to-go " + fmt(tl.return_to_go[i]), "entropy " + fmt(tl.entropy[i]));
    if (i < tl.actions.length) parts.push("action " + (tl.action_names[tl.actions[i]] || tl.actions[i]));
    this.readout.textContent = parts.join(" \u00b7 ");
  }
  draw() {
    const c = this.canvas, dpr = window.devicePixelRatio || 1, W = c.clientWidth, H = c.clientHeight;
    if (!W || !H) return;
    c.width = W * dpr; c.height = H * dpr;
    const g = c.getContext("2d"); g.setTransform(dpr, 0, 0, dpr, 0, 0); g.clearRect(0, 0, W, H);
    const tl = this.tl, x0 = this.pad, w = W - x0 - 8, T = Math.max(tl.T, 1);
    const X = step => x0 + w * step / T;
    g.font = "11px sans-serif";
    if (tl.entropy) {
      const h = (H - 24) / 3;
      const vals = (tl.value || []).concat(tl.return_to_go).filter(v => v !== null);
      this.lines(g, X, 4, h * 1.4, [[tl.value, COLORS.value], [tl.return_to_go, COLORS.rtg]], vals, "value / RTG");
      this.lines(g, X, 12 + h * 1.4, h * 0.8, [[tl.entropy, COLORS.entropy]], [0, 1], "entropy");
      this.bars(g, X, 12 + h * 1.4, h * 0.8, tl.rewards);
      this.stack(g, X, 20 + h * 2.2, h * 0.8, tl.probs);
    }
    g.strokeStyle = COLORS.head; g.lineWidth = 2; g.beginPath();
    g.moveTo(X(this.t), 0); g.lineTo(X(this.t), H); g.stroke();
  }
  lines(g, X, y, h, series, vals, label) {
    let lo = Math.min(...vals), hi = Math.max(...vals); if (!(hi > lo)) { lo -= 1; hi += 1; }
    const Y = v => y + h * (1 - (v - lo) / (hi - lo));
    g.strokeStyle = COLORS.grid; g.lineWidth = 1; g.strokeRect(X(0), y, X(this.tl.T) - X(0), h);
    g.fillStyle = COLORS.text; g.fillText(fmt(hi), 2, y + 10); g.fillText(fmt(lo), 2, y + h - 2);
    g.fillText(label, X(0) + 4, y + 11);
    series.forEach(([s, col]) => {
      if (!s) return;
      g.strokeStyle = col; g.lineWidth = 1.5; g.beginPath();
      s.forEach((v, i) => { if (v !== null) (i ? g.lineTo : g.moveTo).call(g, X(i * this.tl.stride), Y(v)); });
      g.stroke();
    });
  }
  bars(g, X, y, h, rewards) {
    const m = Math.max(...rewards.map(Math.abs), 1e-9); g.fillStyle = COLORS.reward;
    rewards.forEach((r, i) => { if (r) { const bh = h * 0.5 * Math.abs(r) / m; g.fillRect(X(i * this.tl.stride), r > 0 ? y + h * 0.5 - bh : y + h * 0.5, 2, bh); } });
  }
  stack(g, X, y, h, probs) {
    const n = probs.length ? probs[0].length : 0, s = this.tl.stride;
    g.fillStyle = COLORS.text; g.fillText("action probabilities", 2, y - 2);
    for (let i = 0; i < n; i++) {
      let acc = 0; const x = X(i * s), wx = Math.max(X((i + 1) * s) - x, 1);
      probs.forEach((p, a) => { g.fillStyle = PALETTE[a % PALETTE.length]; g.fillRect(x, y + h * acc, wx, h * p[i] + 0.5); acc += p[i]; });
    }
  }
}

DATA.runs.forEach((run, r) => {
  buildTable(run, r);
  run.videos.forEach((v, i) => {
    const box = document.getElementById("video-" + r + "-" + i);
    if (box && v.trace) box.trace = new StepTrace(box, v.trace);  // (a multi-agent video has no trace)
  });
});
window.rlvizReady = true;
