"use strict";
/* What the graph and topic pages share: the data, a pannable and zoomable canvas, hit testing, DOM helpers. */

async function loadData() {
  const raw = atob(document.getElementById("data").textContent.trim());
  const bytes = new Uint8Array(raw.length);
  for (let i = 0; i < raw.length; i++) bytes[i] = raw.charCodeAt(i);
  const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
  return JSON.parse(await new Response(stream).text());
}

/* el("li", {class: "x", onclick: f}, "text", child...): text is always text, never markup. */
function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v == null) continue;
    if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else if (k === "class") e.className = v;
    else e.setAttribute(k, v);
  }
  for (const k of kids) if (k != null) e.append(k instanceof Node ? k : String(k));
  return e;
}

function ready() {
  document.documentElement.dataset.ready = String(Math.max(1, Math.round(performance.now())));
}

function tabs() {
  const buttons = document.querySelectorAll(".tabs button");
  const show = (name) => buttons.forEach((b) => {
    b.classList.toggle("on", b.dataset.tab === name);
    document.getElementById(b.dataset.tab).classList.toggle("on", b.dataset.tab === name);
  });
  buttons.forEach((b) => b.addEventListener("click", () => show(b.dataset.tab)));
  return show;
}

/* A canvas showing world coordinates xs, ys: wheel zooms at the pointer, a drag pans, a click without a drag
   calls onClick(world point); draw(ctx, view) paints. */
function makeView(canvas, xs, ys, draw, onClick, onMove) {
  const ctx = canvas.getContext("2d");
  const v = { s: 1, tx: 0, ty: 0, w: 0, h: 0 };
  let pending = false;
  v.sx = (x) => x * v.s + v.tx;
  v.sy = (y) => y * v.s + v.ty;
  v.redraw = () => {
    if (pending) return;
    pending = true;
    requestAnimationFrame(v.paint);
  };
  v.paint = () => {
    pending = false;
    const dpr = window.devicePixelRatio || 1;
    const w = canvas.clientWidth, h = canvas.clientHeight;
    if (canvas.width !== Math.round(w * dpr) || canvas.height !== Math.round(h * dpr)) {
      canvas.width = Math.round(w * dpr);
      canvas.height = Math.round(h * dpr);
    }
    v.w = w; v.h = h;
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.clearRect(0, 0, w, h);
    draw(ctx, v);
  };
  v.fit = (idx, padRight = 40) => {
    const w = canvas.clientWidth || 800, h = canvas.clientHeight || 600;
    let x0 = Infinity, x1 = -Infinity, y0 = Infinity, y1 = -Infinity;
    for (const i of idx) {
      x0 = Math.min(x0, xs[i]); x1 = Math.max(x1, xs[i]); y0 = Math.min(y0, ys[i]); y1 = Math.max(y1, ys[i]);
    }
    if (!(x1 >= x0)) { x0 = y0 = -1; x1 = y1 = 1; }
    const span = Math.max(x1 - x0, y1 - y0, 1e-6);
    v.s = Math.min((w - 40 - padRight) / Math.max(x1 - x0, span / 4), (h - 80) / Math.max(y1 - y0, span / 4));
    v.tx = (w - padRight + 40) / 2 - v.s * (x0 + x1) / 2;
    v.ty = h / 2 - v.s * (y0 + y1) / 2;
    v.redraw();
  };
  /* the nearest point to the pointer within r pixels among those keep(i) allows, or -1 */
  v.nearest = (px, py, r, keep) => {
    let best = -1, bd = r * r;
    for (let i = 0; i < xs.length; i++) {
      if (keep && !keep(i)) continue;
      const dx = v.sx(xs[i]) - px, dy = v.sy(ys[i]) - py, d = dx * dx + dy * dy;
      if (d <= bd) { bd = d; best = i; }
    }
    return best;
  };
  let drag = null;
  canvas.addEventListener("wheel", (ev) => {
    ev.preventDefault();
    const f = Math.exp(-ev.deltaY * 0.0015), r = canvas.getBoundingClientRect();
    const px = ev.clientX - r.left, py = ev.clientY - r.top;
    v.tx = px - (px - v.tx) * f; v.ty = py - (py - v.ty) * f; v.s *= f;
    v.redraw();
  }, { passive: false });
  canvas.addEventListener("mousedown", (ev) => { drag = { x: ev.clientX, y: ev.clientY, moved: false }; });
  window.addEventListener("mouseup", (ev) => {
    if (drag && !drag.moved && ev.target === canvas) {
      const r = canvas.getBoundingClientRect();
      onClick(ev.clientX - r.left, ev.clientY - r.top);
    }
    drag = null;
    canvas.classList.remove("dragging");
  });
  canvas.addEventListener("mousemove", (ev) => {
    const r = canvas.getBoundingClientRect();
    if (drag) {
      const dx = ev.clientX - drag.x, dy = ev.clientY - drag.y;
      if (drag.moved || Math.abs(dx) + Math.abs(dy) > 3) {
        drag.moved = true;
        canvas.classList.add("dragging");
        v.tx += dx; v.ty += dy; drag.x = ev.clientX; drag.y = ev.clientY;
        v.redraw();
      }
      return;
    }
    onMove(ev.clientX - r.left, ev.clientY - r.top);
  });
  canvas.addEventListener("mouseleave", () => onMove(-1e9, -1e9));
  window.addEventListener("resize", () => v.redraw());
  return v;
}

/* the tooltip: rows of text near (x, y); rows empty: hidden */
function tip(x, y, rows) {
  const t = document.getElementById("tip");
  if (!rows || !rows.length) { t.style.display = "none"; return; }
  t.replaceChildren(...rows.map((r) => (r instanceof Node ? r : el("div", {}, r))));
  t.style.display = "block";
  const stage = t.parentElement;
  t.style.left = Math.min(x + 14, stage.clientWidth - t.offsetWidth - 4) + "px";
  t.style.top = Math.min(y + 14, stage.clientHeight - t.offsetHeight - 4) + "px";
}
