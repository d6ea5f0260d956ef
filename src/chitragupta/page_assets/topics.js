/* The topic map: documents at the 2-D coordinates the bertopic stage wrote, coloured by topic, each topic
   labelled at the middle of its documents. */
loadData().then((D) => {
  const docs = D.documents, n = docs.length;
  const X = docs.map((d) => d.x), Y = docs.map((d) => -d.y);
  const topics = D.topics, byId = new Map(topics.map((t) => [t.id, t]));
  const colour = (id) => (id === -1 ? "#b5b5b5" : `hsl(${(id * 137.508) % 360}, 62%, ${id % 2 ? 38 : 48}%)`);
  const hay = docs.map((d) => (d.citekey + " " + d.title).toLowerCase());
  const S = { q: "", focus: null, hover: -1 };
  const lit = (i) => (S.focus === null || docs[i].topic === S.focus) && (!S.q || hay[i].includes(S.q));
  document.title = D.title_;
  document.getElementById("title").textContent = D.title_;
  const real = topics.filter((t) => t.id !== -1);
  document.getElementById("shown").textContent =
    `${real.length} topics, ${n} documents, ${D.n_outliers} outliers \u00b7 ${D.model || ""}`;

  // each topic's label sits at the median of its documents' points
  const middle = new Map();
  for (const t of real) {
    const idx = [...Array(n).keys()].filter((i) => docs[i].topic === t.id);
    const med = (a) => { const s = a.slice().sort((p, q) => p - q); return s.length ? s[s.length >> 1] : 0; };
    middle.set(t.id, [med(idx.map((i) => X[i])), med(idx.map((i) => Y[i]))]);
  }
  const layer = document.getElementById("labels");
  const labels = real.map((t) => {
    const d = el("div", { class: "topic-label", "data-topic": t.id, title: t.words.join(", "),
      onclick: () => focus(t.id) }, t.label);
    d.style.borderColor = d.style.color = colour(t.id);
    layer.append(d);
    return d;
  });

  function draw(ctx, v) {
    for (const pass of [0, 1]) {  // outliers and the unlit below
      for (let i = 0; i < n; i++) {
        const t = docs[i].topic, on = lit(i);
        if ((pass === 1) !== (on && t !== -1)) continue;
        ctx.globalAlpha = on ? (t === -1 ? 0.55 : 0.85) : 0.1;
        ctx.fillStyle = colour(t);
        ctx.beginPath();
        ctx.arc(v.sx(X[i]), v.sy(Y[i]), i === S.hover ? 6 : t === -1 ? 2.2 : 3.4, 0, 2 * Math.PI);
        ctx.fill();
      }
    }
    ctx.globalAlpha = 1;
    // labels: at their topic's middle, moved down or up past the labels already placed (largest first)
    const placed = [];
    for (const [k, t] of real.entries()) {
      const d = labels[k], [mx, my] = middle.get(t.id);
      const w = d.offsetWidth, h = d.offsetHeight;
      let x = Math.max(w / 2 + 2, Math.min(v.w - w / 2 - 2, v.sx(mx))), y = v.sy(my), best = y;
      for (let step = 0; step < 24; step++) {
        const yy = y + (step % 2 ? 1 : -1) * Math.ceil(step / 2) * (h + 2);
        const r = [x - w / 2, yy - h / 2, x + w / 2, yy + h / 2];
        if (!placed.some((p) => r[0] < p[2] && r[2] > p[0] && r[1] < p[3] && r[3] > p[1])) { best = yy; break; }
      }
      best = Math.max(h / 2 + 2, Math.min(v.h - h / 2 - 2, best));
      placed.push([x - w / 2, best - h / 2, x + w / 2, best + h / 2]);
      d.style.left = x + "px";
      d.style.top = best + "px";
      d.style.opacity = S.focus === null || S.focus === t.id ? 1 : 0.35;
    }
  }

  const canvas = document.getElementById("canvas");
  const view = makeView(canvas, X, Y, draw, (px, py) => {
    const i = view.nearest(px, py, 10, lit);
    focus(i < 0 ? null : docs[i].topic === -1 ? null : docs[i].topic);
  }, (px, py) => {
    const i = view.nearest(px, py, 10, lit);
    if (i !== S.hover) { S.hover = i; view.redraw(); }
    if (i < 0) return tip(0, 0, null);
    const t = byId.get(docs[i].topic);
    tip(px, py, [el("b", {}, docs[i].title || docs[i].citekey), el("span", { class: "key" }, docs[i].citekey),
      el("div", {}, el("span", { class: "legend-dot", style: `background:${colour(docs[i].topic)}` }),
        t ? (t.id === -1 ? t.label : `topic ${t.id}: ${t.label}`) : "")]);
  });

  function focus(id) {
    S.focus = S.focus === id ? null : id;
    for (const li of document.querySelectorAll("#topic-list li")) li.classList.toggle("on", Number(li.dataset.topic) === S.focus);
    const idx = [...Array(n).keys()].filter((i) => S.focus === null || docs[i].topic === S.focus);
    view.fit(idx.length ? idx : [...Array(n).keys()]);
  }

  const list = document.getElementById("topic-list");
  for (const t of topics) {
    list.append(el("li", { "data-topic": t.id, onclick: () => focus(t.id) },
      el("div", {}, el("span", { class: "legend-dot", style: `background:${colour(t.id)}` }),
        el("b", {}, t.id === -1 ? t.label : `${t.id}: ${t.label}`), el("span", { class: "badge" }, `${t.size} documents`)),
      ...t.examples.map((e) => el("div", { class: "meta" }, "\u2013 ", e.title || e.citekey))));
  }
  const q = document.getElementById("q");
  q.addEventListener("input", () => { S.q = q.value.trim().toLowerCase(); view.redraw(); });
  document.getElementById("fit").addEventListener("click", () => view.fit([...Array(n).keys()]));
  view.fit([...Array(n).keys()]);
  view.paint();
  ready();
});
