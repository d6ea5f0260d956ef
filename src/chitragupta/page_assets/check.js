/* A checked draft: the draft's lines, each citation marked by its status where it stands, and beside its
   line a card with the status, the support, the evidence (passage and page), the keys meant and the
   alternatives; claims without a citation get a card with the candidates. */
loadData().then((D) => {
  const C = D.check || {}, lines = D.draft.split(/\r\n|\r|\n/);
  const STATUS = ["unsupported", "unknown", "weak", "no-text", "supported"];
  const WHY = { unknown: "not a source of your library", "no-text": "no text of this source to check against" };
  const byLine = new Map();
  const add = (ln, item) => { if (!byLine.has(ln)) byLine.set(ln, []); byLine.get(ln).push(item); };
  (C.citations || []).forEach((c, k) => add(c.line, { c, k }));
  (C.uncited || []).forEach((c) => add(c.line, { c, k: null }));
  document.title = D.title_;
  document.getElementById("title").textContent = D.title_;
  const counts = {};
  for (const c of C.citations || []) counts[c.status] = (counts[c.status] || 0) + 1;
  document.getElementById("summary").replaceChildren(
    ...STATUS.filter((s) => counts[s]).map((s) => el("span", { class: `cite s-${s}` }, `${counts[s]} ${s}`)),
    (C.uncited || []).length ? el("span", { class: "cite s-uncited" }, `${C.uncited.length} uncited claims`) : null,
    el("span", { class: "meta" }, `${(C.citations || []).length} citations` + (C.engine ? ` \u00b7 engine: ${C.engine}` : "")));
  document.getElementById("notes").replaceChildren(...(C.notes || []).map((n) => el("div", {}, typeof n === "string" ? n : n.text)));

  const name = (x) => (typeof x === "string" ? x : x.citekey || x.key || JSON.stringify(x));
  const score = (x) => (typeof x.support === "number" ? ` (${x.support.toFixed(2)})` : "");
  const passage = (e) => (e && (e.text || e.passage) ? el("div", { class: "evidence" }, e.text || e.passage,
    e.page != null ? el("span", { class: "meta" }, ` (page ${e.page})`) : null) : null);
  function card({ c, k }) {
    const status = k === null ? "uncited" : c.status;
    const others = k === null ? c.candidates || [] : c.alternatives || [];
    return el("div", { class: `card s-${status}`, id: k === null ? null : `card-${k}` },
      el("div", {}, el("span", { class: "status" }, k === null ? "uncited claim" : status), " ",
        k === null ? null : el("span", { class: "key" }, c.key), k === null ? null : score(c)),
      k === null ? null : passage(c.evidence) || el("div", { class: "meta" }, WHY[c.status] || "no passage found"),
      (c.did_you_mean || []).length ? el("div", {}, "did you mean: ", c.did_you_mean.map(name).join(", ")) : null,
      others.length ? el("div", {}, k === null ? "candidates:" : "better supported by:",
        el("ul", {}, ...others.map((a) => el("li", {}, el("span", { class: "key" }, name(a)), score(a), passage(a.evidence || a))))) : null);
  }
  /* the line's text with each citation's key marked, left to right, each key found after the previous one */
  function marked(text, items) {
    const out = [];
    let at = 0;
    for (const { c, k } of items.filter((it) => it.k !== null && it.c.key)) {
      let i = at - 1;
      do { i = text.indexOf(c.key, i + 1); } while (i >= 0 && (/[\w]/.test(text[i - 1] || "") || /[\w]/.test(text[i + c.key.length] || "")));
      if (i < 0) continue;
      out.push(text.slice(at, i), el("a", { class: `cite s-${c.status}`, href: `#card-${k}`, "data-status": c.status,
        title: `${c.status}${score(c)}` }, c.key));
      at = i + c.key.length;
    }
    out.push(text.slice(at));
    return out;
  }
  const box = document.getElementById("draft");
  const rows = [];
  const last = Math.max(lines.length, ...byLine.keys());
  for (let ln = 1; ln <= last; ln++) {
    const items = byLine.get(ln) || [];
    const row = [el("div", { class: "ln" }, ln), el("div", { class: items.some((it) => it.k === null) ? "tx s-uncited" : "tx" }, ...marked(lines[ln - 1] ?? "", items)),
      el("div", { class: "notes" }, ...items.map(card))];
    box.append(...row);
    rows.push([row, items.length > 0]);
  }
  document.getElementById("only").addEventListener("change", (ev) => {
    for (const [row, found] of rows) for (const e of row) e.classList.toggle("hidden", ev.target.checked && !found);
  });
  ready();
});
