/* The citation graph: sources (blue) and the works they cite that the library lacks (grey, dashed, sized by
   how many sources cite them); positions come with the data (chitragupta.pages.layout). */
loadData().then((D) => {
  const n = D.id.length, X = D.xy.map((p) => p[0]), Y = D.xy.map((p) => p[1]);
  const E = D.edges, m = E.length / 3;
  const outs = Array.from({ length: n }, () => []), ins = Array.from({ length: n }, () => []);
  for (let k = 0; k < m; k++) { outs[E[3 * k]].push(k); ins[E[3 * k + 1]].push(k); }
  const missing = (i) => D.missing[i] === 1;
  const cited = (i) => (missing(i) && D.count[i] != null ? D.count[i] : ins[i].length);
  const radius = (i) => (missing(i) ? Math.min(2.5 + 1.5 * Math.sqrt(cited(i)), 16) : Math.min(5 + Math.sqrt(cited(i)), 12));
  const hay = D.id.map((id, i) => [id, D.title[i], D.authors[i].join(" "), D.year[i] ?? ""].join(" ").toLowerCase());
  const S = { q: "", y0: null, y1: null, undated: true, sel: -1, hover: -1, near: new Set() };
  const inYears = (i) => {
    const y = D.year[i];
    if (y == null) return S.undated;
    return (S.y0 == null || y >= S.y0) && (S.y1 == null || y <= S.y1);
  };
  const matches = (i) => !S.q || hay[i].includes(S.q);
  const shown = (i) => inYears(i) && matches(i);
  const nSources = D.missing.filter((k) => k === 0).length;
  const short = (s, k) => (s.length > k ? s.slice(0, k - 1) + "\u2026" : s);
  const who = (a) => (a.length > 6 ? a.slice(0, 6).join(", ") + " et al." : a.join(", "));
  const name = (i) => (missing(i) ? short(D.title[i] || "(untitled)", 48) : D.id[i]);

  document.title = D.title_;
  document.getElementById("title").textContent = D.title_;
  const years = D.year.filter((y) => y != null);
  if (years.length) {
    const lo = Math.min(...years), hi = Math.max(...years);
    for (const [id, val] of [["y0", lo], ["y1", hi]]) Object.assign(document.getElementById(id), { min: lo, max: hi, placeholder: val });
  }

  function draw(ctx, v) {
    ctx.lineWidth = 1;
    ctx.strokeStyle = `rgba(80,90,110,${Math.max(0.05, Math.min(0.4, 10 / Math.sqrt(m + 1)))})`;
    ctx.beginPath();
    for (let k = 0; k < m; k++) {
      const a = E[3 * k], b = E[3 * k + 1];
      if (!inYears(a) || !inYears(b)) continue;
      ctx.moveTo(v.sx(X[a]), v.sy(Y[a]));
      ctx.lineTo(v.sx(X[b]), v.sy(Y[b]));
    }
    ctx.stroke();
    if (S.sel >= 0) {
      ctx.strokeStyle = "#d9822b";
      ctx.lineWidth = 1.6;
      ctx.beginPath();
      for (const k of outs[S.sel].concat(ins[S.sel])) {
        const a = E[3 * k], b = E[3 * k + 1];
        ctx.moveTo(v.sx(X[a]), v.sy(Y[a]));
        ctx.lineTo(v.sx(X[b]), v.sy(Y[b]));
      }
      ctx.stroke();
    }
    const onScreen = [], drawn = [0, 0];
    for (const pass of [1, 0]) {  // missing works below the sources
      ctx.setLineDash(pass ? [3, 2] : []);
      for (let i = 0; i < n; i++) {
        if (D.missing[i] !== pass || !inYears(i)) continue;
        const x = v.sx(X[i]), y = v.sy(Y[i]), r = radius(i);
        if (x < -r || y < -r || x > v.w + r || y > v.h + r) continue;
        ctx.globalAlpha = matches(i) ? 1 : 0.12;
        ctx.beginPath();
        ctx.arc(x, y, r, 0, 2 * Math.PI);
        ctx.fillStyle = pass ? "#ffffff" : "#2f6fb0";
        ctx.fill();
        ctx.lineWidth = i === S.sel ? 3 : 1.2;
        ctx.strokeStyle = i === S.sel ? "#d9822b" : pass ? "#777" : "#fff";
        ctx.stroke();
        drawn[pass]++;
        if (matches(i)) onScreen.push(i);
      }
    }
    ctx.setLineDash([]);
    ctx.globalAlpha = 1;
    [canvas.dataset.sources, canvas.dataset.missing] = drawn;  // nodes painted inside the canvas (tests read them)
    // labels where there is room for them: the selected node and its neighbours first, then sources, then
    // missing works, most cited first
    const prio = (i) => (i === S.sel) * 4e9 + (i === S.hover) * 2e9 + S.near.has(i) * 1e9 + !missing(i) * 1e8 + cited(i);
    const placed = [];
    ctx.font = "12px system-ui, sans-serif";
    ctx.lineWidth = 3;
    ctx.strokeStyle = "rgba(255,255,255,0.9)";
    for (const i of onScreen.sort((a, b) => prio(b) - prio(a)).slice(0, 400)) {
      const t = name(i), x = v.sx(X[i]) + radius(i) + 3, y = v.sy(Y[i]) + 4;
      const r = [x, y - 11, x + ctx.measureText(t).width, y + 3];
      if (placed.some((p) => r[0] < p[2] && r[2] > p[0] && r[1] < p[3] && r[3] > p[1])) continue;
      placed.push(r);
      ctx.fillStyle = missing(i) ? "#555" : "#1b3f66";
      ctx.strokeText(t, x, y);
      ctx.fillText(t, x, y);
    }
  }

  const canvas = document.getElementById("canvas");
  const view = makeView(canvas, X, Y, draw, (px, py) => select(view.nearest(px, py, 14, shown), false), (px, py) => {
    const i = view.nearest(px, py, 12, shown);
    if (i !== S.hover) { S.hover = i; view.redraw(); }
    if (i < 0) return tip(0, 0, null);
    tip(px, py, [el("b", {}, D.title[i] || "(untitled)"), D.authors[i].length ? who(D.authors[i]) : null,
      [D.year[i] ?? "no year", missing(i) ? `not in your library \u00b7 cited by ${cited(i)} of your sources` : `${D.id[i]} \u00b7 cited by ${cited(i)}, cites ${outs[i].length}`].join(" \u00b7 ")].filter((r) => r));
  });
  const showTab = tabs();

  function edgeItem(k, other) {
    return el("li", { onclick: () => select(other, true) },
      el("div", {}, missing(other) ? el("span", { class: "badge missing" }, "not in library") : el("span", { class: "key" }, D.id[other]),
        " ", D.title[other] || "(untitled)"),
      el("div", { class: "evidence" }, D.texts[E[3 * k + 2]] || "(no entry text)"));
  }

  function select(i, center) {
    S.sel = i;
    S.near = new Set(i < 0 ? [] : outs[i].map((k) => E[3 * k + 1]).concat(ins[i].map((k) => E[3 * k])));
    const box = document.getElementById("details");
    if (i < 0) { view.redraw(); return; }
    const head = [el("h2", {}, D.title[i] || "(untitled)"),
      el("div", { class: "meta" }, [who(D.authors[i]), D.year[i] ?? "no year"].filter((s) => s !== "").join(" \u00b7 ")),
      missing(i) ? el("p", {}, el("span", { class: "badge missing" }, "not in your library"), ` cited by ${cited(i)} of your sources; `,
        "the BibTeX entries of these works are under Missing")
        : el("p", {}, el("span", { class: "key" }, D.id[i]), " in your library")];
    const cites = outs[i].map((k) => edgeItem(k, E[3 * k + 1])), by = ins[i].map((k) => edgeItem(k, E[3 * k]));
    box.replaceChildren(...head,
      el("h3", {}, `Cited by ${by.length} of your sources` + (by.length ? ": their entries" : "")), el("ul", { class: "items" }, ...by),
      missing(i) ? null : el("h3", {}, `Cites ${cites.length} in this graph`), missing(i) ? null : el("ul", { class: "items" }, ...cites));
    showTab("details");
    if (center) {
      view.s = Math.max(view.s, 30);
      view.tx = view.w / 2 - X[i] * view.s;
      view.ty = view.h / 2 - Y[i] * view.s;
    }
    view.redraw();
  }

  const rows = [];
  const sourceList = document.getElementById("source-list"), missingList = document.getElementById("missing-list");
  const order = [...Array(n).keys()].filter((i) => !missing(i)).sort((a, b) => (D.id[a] < D.id[b] ? -1 : 1))
    .concat([...Array(n).keys()].filter(missing));  // missing works in the data's order: most cited first
  // the lists as markup, every value escaped: thousands of rows at a fraction of createElement's cost
  const esc = (v) => String(v).replace(/[&<>"]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" })[c]);
  const row = (i) => (missing(i)
    ? `<li class="missing" data-id="${esc(D.id[i])}" data-i="${i}">${esc(D.title[i] || "(untitled)")}<span class="badge">cited by ${cited(i)}</span>` +
      `<div class="meta">${esc([who(D.authors[i]), D.year[i]].filter((v) => v).join(" \u00b7 "))}</div></li>`
    : `<li class="source" data-id="${esc(D.id[i])}" data-i="${i}"><span class="key">${esc(D.id[i])}</span> ${esc(D.title[i])}` +
      `${D.year[i] ? ` (${D.year[i]})` : ""}</li>`);
  for (const [list, kind] of [[sourceList, false], [missingList, true]]) {
    list.innerHTML = order.filter((i) => missing(i) === kind).map(row).join("");
    for (const li of list.children) rows[Number(li.dataset.i)] = li;
  }
  for (const list of [sourceList, missingList]) {
    list.addEventListener("click", (ev) => { const li = ev.target.closest("li"); if (li) select(Number(li.dataset.i), true); });
  }
  const bib = document.getElementById("bib");
  const parts = [el("p", { class: "meta" }, `${n - nSources} works your sources cite that your library lacks, most cited first.`)];
  if (D.bibtex) {
    const pre = el("pre", { class: "bib hidden", id: "bibtex" }, D.bibtex);
    parts.push(el("p", {}, el("button", { type: "button", id: "bib-save", onclick: () => {
      const a = el("a", { href: URL.createObjectURL(new Blob([D.bibtex], { type: "application/x-bibtex" })), download: "missing.bib" });
      a.click();
    } }, "Save as BibTeX"), " ", el("button", { type: "button", onclick: () => pre.classList.toggle("hidden") }, "Show BibTeX")), pre);
  }
  if (D.command) parts.push(el("p", { class: "meta" }, "From the command line: ", el("code", {}, D.command)));
  bib.replaceChildren(...parts);

  function filter() {
    let s = 0, w = 0;
    for (let i = 0; i < n; i++) {
      const on = shown(i);
      if (rows[i].classList.contains("hidden") === on) rows[i].classList.toggle("hidden", !on);
      if (on) missing(i) ? w++ : s++;
    }
    document.getElementById("n-sources").textContent = s === nSources ? `(${s})` : `(${s} of ${nSources})`;
    document.getElementById("n-missing").textContent = w === n - nSources ? `(${w})` : `(${w} of ${n - nSources})`;
    document.getElementById("shown").textContent = `${s} sources, ${w} missing works, ${m} citations`;
    view.redraw();
  }
  const q = document.getElementById("q");
  q.addEventListener("input", () => { S.q = q.value.trim().toLowerCase(); filter(); });
  q.addEventListener("keydown", (ev) => {
    if (ev.key !== "Enter") return;
    const i = order.find((j) => shown(j));
    if (i !== undefined) select(i, true);
  });
  for (const id of ["y0", "y1"]) {
    document.getElementById(id).addEventListener("input", (ev) => {
      const y = parseInt(ev.target.value, 10);
      S[id] = Number.isFinite(y) ? y : null;
      filter();
    });
  }
  document.getElementById("undated").addEventListener("change", (ev) => { S.undated = ev.target.checked; filter(); });
  document.getElementById("fit").addEventListener("click", () => view.fit([...Array(n).keys()].filter(shown), n <= 300 ? 220 : 40));
  filter();
  view.fit([...Array(n).keys()], n <= 300 ? 220 : 40);
  view.paint();
  ready();
});
