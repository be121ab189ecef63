// The live page of `sleeplock serve`: no framework, no build step.
"use strict";
(function () {
  const PAGE = 100;          // locks shown per "page"
  const MAX_CELLS = 32;      // slot cells drawn per lock
  const FEED = 60;           // events kept in the feed
  const STATS_ROWS = 15;     // rows of the counters table
  const $ = (id) => document.getElementById(id);
  let prefix = "", limit = PAGE, names = [], total = 0, allowRelease = false, es = null;
  const views = new Map();   // name → {v: lock view, t0: local time it was received}
  const waits = [];          // recent wait times, ms

  const esc = (s) => String(s).replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[c]));
  const num = (n) => n.toLocaleString("en-US");
  // A holder's or waiter's weight, shown the same way for both (as the
  // table of `sleeplock state`): "exclusive" when it takes every slot.
  const weightText = (x) => (x.exclusive ? " · exclusive" : x.weight > 1 ? " · " + x.weight + " slots" : "");
  function dur(ms) {
    if (ms == null) return "";
    const neg = ms < 0; ms = Math.abs(ms);
    let s;
    if (ms < 1000) s = Math.round(ms) + "ms";
    else if (ms < 60000) s = (ms / 1000).toFixed(1) + "s";
    else if (ms < 3600000) s = Math.floor(ms / 60000) + "m" + String(Math.floor(ms / 1000) % 60).padStart(2, "0") + "s";
    else s = Math.floor(ms / 3600000) + "h" + String(Math.floor(ms / 60000) % 60).padStart(2, "0") + "m";
    return neg ? "-" + s : s;
  }

  let loading = null, pending = [];
  // load fetches the locks after any load in flight (the last one wins).
  function load() {
    const p = (loading || Promise.resolve()).catch(() => {}).then(fetchLocks);
    loading = p;
    p.finally(() => {
      if (loading !== p) return;
      loading = null;
      const q = pending; pending = []; for (const f of q) f();
    });
    return p;
  }
  // later runs f now, or after the load in flight.
  const later = (f) => (loading ? pending.push(f) : f());

  const short = (s) => (s.length > 24 ? s.slice(0, 12) + "…" + s.slice(-6) : s);

  async function fetchLocks() {
    const q = new URLSearchParams({ prefix, limit: String(limit) });
    let res, list;
    try {
      res = await fetch("/api/locks?" + q);
      list = await res.json();
    } catch (err) {
      if (!names.length) $("locks").innerHTML = '<p class="empty">cannot load the locks: ' + esc(err.message) + "</p>";
      return;
    }
    if (!res.ok) { $("locks").innerHTML = '<p class="empty">' + esc(list.error) + "</p>"; return; }
    $("locks").removeAttribute("aria-busy");
    total = Number(res.headers.get("Sleeplock-Total") || list.length);
    names = list.map((v) => v.name);
    views.clear();
    const now = performance.now();
    for (const v of list) views.set(v.name, { v, t0: now });
    renderAll();
  }

  function renderAll() {
    const root = $("locks");
    root.textContent = "";
    if (names.length === 0) root.innerHTML = '<p class="empty">no locks' + (prefix ? " under “" + esc(prefix) + "”" : "") + "</p>";
    for (const n of names) root.appendChild(card(n));
    counts();
  }

  function counts() {
    $("count").textContent = names.length < total ? `showing ${names.length} of ${total} locks` : `${total} lock${total === 1 ? "" : "s"}`;
    $("more").hidden = names.length >= total;
  }

  function card(name) {
    const el = document.createElement("div");
    el.className = "lock";
    el.dataset.name = name;
    fill(el, views.get(name));
    return el;
  }

  function fill(el, entry) {
    const v = entry.v;
    el.classList.toggle("busy", v.running > 0);
    el.classList.toggle("queued", v.waiting > 0);
    let h = '<div class="head"><span class="name">' + esc(v.name) + "</span>" +
      '<span class="nums">' + num(v.slots) + " slot" + (v.slots === 1 ? "" : "s") + (v.family ? " each (family)" : "") +
      " · " + v.running + " running" + (v.leases > 0 && v.leases !== v.running + v.expired ? " (" + v.leases + " holders)" : "") +
      " · " + v.waiting + " waiting</span></div>" + election(v.election) + '<div class="cells">';
    let drawn = 0;
    if (v.family) h += '<span class="muted">a family: each member (' + esc(v.name.slice(0, -1)) + '…) is a lock of its own, listed while in use</span>';
    const gauged = !v.family && v.slots > MAX_CELLS;
    if (gauged) h += gauge(v);
    for (const ho of v.holders) {
      if (drawn++ >= MAX_CELLS) break;
      const k = ho.kind ? " k-" + esc(ho.kind) : "";
      const expired = ho.left_ms != null && ho.left_ms < 0 ? " expired" : (ho.late ? " late" : "");
      h += '<div class="cell held' + k + expired + '" data-ref="' + esc(ho.ref) + '">' +
        (allowRelease && !v.family ? '<button data-release="' + esc(ho.ref) + '" title="release this holder">release</button>' : "") +
        '<div class="kind">' + esc(ho.kind || "holder") + weightText(ho) + "</div>" +
        '<div class="ref" title="' + esc(ho.ref) + '">' + esc(ho.ref) + "</div>" +
        '<div class="t">held <span data-up="' + (ho.age_ms ?? "") + '">' + dur(ho.age_ms) + "</span>" +
        (ho.left_ms == null ? " · no expiry" : ' · left <span data-down="' + ho.left_ms + '">' + dur(ho.left_ms) + "</span>") +
        (ho.kept_ms == null ? "" : ' · renewed <span data-up="' + ho.kept_ms + '">' + dur(ho.kept_ms) + "</span> ago" +
          (ho.late ? ' <b class="late" title="it missed a renewal it owed (one every third of its lease): its process may be dead or stopped">LATE</b>' : "")) +
        "</div></div>";
    }
    const free = v.family || gauged ? 0 : Math.max(0, v.slots - v.running);
    const freeCells = Math.min(free, Math.max(0, MAX_CELLS - drawn));
    for (let i = 0; i < freeCells; i++) h += '<div class="cell free">free</div>';
    if (gauged && v.holders.length > MAX_CELLS) h += '<span class="morecells">+' + num(v.holders.length - MAX_CELLS) + " more holders</span>";
    else if (v.holders.length + free > drawn + freeCells) h += '<span class="morecells">+' + (v.holders.length + free - drawn - freeCells) + " more slots</span>";
    h += "</div>";
    if (v.queue.length) {
      h += '<ol class="queue">';
      for (const w of v.queue) {
        h += '<li><span class="ref">' + esc(w.ref) + "</span>" + (w.kind ? " (" + esc(w.kind) + ")" : "") +
          weightText(w) +
          ' waited <span data-up="' + (w.waited_ms ?? "") + '">' + dur(w.waited_ms) + "</span>" +
          (w.locks.length > 1 ? " · all of " + esc(w.locks.join(", ")) : "") + "</li>";
      }
      h += "</ol>";
    }
    el.innerHTML = h;
    el.dataset.t0 = entry.t0;
  }

  // election shows the election a lock is the lock of: who leads (its
  // value), the term's token, since when, and the candidates waiting.
  function election(el) {
    if (!el) return "";
    const waiting = " · " + el.waiting + " candidate" + (el.waiting === 1 ? "" : "s") + " waiting";
    if (el.vacant) return '<div class="election vacant">election · <b>vacant</b>' + waiting + "</div>";
    return '<div class="election">election · leader <b class="leader">' + esc(el.leader) + "</b>" +
      (el.value ? ' (<span class="value">' + esc(el.value) + "</span>)" : "") +
      ' · term <span class="token">' + el.token + "</span>" +
      (el.age_ms == null ? "" : ' · since <span data-up="' + el.age_ms + '">' + dur(el.age_ms) + "</span>") + waiting + "</div>";
  }

  // gauge draws a lock of more slots than cells: the share in use (and
  // held past expiry) as a bar, with the numbers.
  function gauge(v) {
    const pct = (n) => (100 * n) / v.slots;
    const live = Math.max(0, v.running - v.expired);
    const bar = (n, cls) => (n > 0 ? '<div class="' + cls + '" style="width:' + pct(n) + '%"></div>' : "");
    return '<div class="gauge" role="meter" aria-valuemin="0" aria-valuemax="' + v.slots + '" aria-valuenow="' + v.running + '">' +
      bar(live, "used") + bar(v.expired, "used expired") + "</div>" +
      '<div class="gaugetext">' + num(v.running) + " of " + num(v.slots) + " slots in use (" + (v.running ? pct(v.running).toPrecision(2) : "0") + "%)" +
      (v.expired ? " · " + num(v.expired) + " expired" : "") + " · " + num(Math.max(0, v.slots - v.running)) + " free</div>";
  }

  // tick moves the clocks of the holders and waiters without a request.
  function tick() {
    const now = performance.now();
    for (const el of document.querySelectorAll(".lock")) {
      const dt = now - Number(el.dataset.t0);
      for (const s of el.querySelectorAll("[data-up]")) if (s.dataset.up !== "") s.textContent = dur(Number(s.dataset.up) + dt);
      for (const s of el.querySelectorAll("[data-down]")) s.textContent = dur(Number(s.dataset.down) - dt);
    }
  }

  function upsert(v) {
    if (!v.name.startsWith(prefix)) return;
    const entry = { v, t0: performance.now() };
    const known = views.has(v.name);
    views.set(v.name, entry);
    const el = document.querySelector('.lock[data-name="' + CSS.escape(v.name) + '"]');
    if (known && el) { fill(el, entry); return; }
    // Beyond the page shown: not drawn (and already counted, unless it is new:
    // the next load tells).
    if (names.length >= limit && v.name > names[names.length - 1]) { views.delete(v.name); return; }
    let i = names.findIndex((n) => n > v.name);
    if (i < 0) i = names.length;
    names.splice(i, 0, v.name);
    total++;
    const root = $("locks");
    if (names.length === 1) root.textContent = "";
    const c = card(v.name);
    const after = root.querySelector('.lock[data-name="' + CSS.escape(names[i + 1] || "") + '"]');
    root.insertBefore(c, names[i + 1] ? after : null);
    if (names.length > limit) { const last = names.pop(); views.delete(last); root.querySelector('.lock[data-name="' + CSS.escape(last) + '"]')?.remove(); }
    counts();
  }

  function gone(name) {
    const i = names.indexOf(name);
    if (i < 0) { if (name.startsWith(prefix)) { total = Math.max(names.length, total - 1); counts(); } return; }
    names.splice(i, 1);
    views.delete(name);
    total = Math.max(0, total - 1);
    document.querySelector('.lock[data-name="' + CSS.escape(name) + '"]')?.remove();
    counts();
  }

  function feed(e) {
    let what = esc(e.lock);
    if (e.ref) what += " · " + esc(short(e.ref)) + (e.kind ? " (" + esc(e.kind) + ")" : "");
    if (e.waited_ms != null) what += " · waited " + dur(e.waited_ms);
    if (e.held_ms != null) what += " · held " + (e.seen ? "≤ " : "") + dur(e.held_ms);
    if (e.holder) what += " · held by " + esc(e.holder);
    if (e.reason) what += " · " + esc(e.reason);
    const by = e.seen ? '<span class="by" title="another process: read from the store by the poll">↻</span>' : "";
    item(e.time, e.type, by + what, e.seen ? "polled" : "");
    if (e.type === "acquired" && e.waited_ms != null) wait(e.waited_ms);
  }

  // missed tells the grants and ended holds of other processes that only
  // the store's counters showed.
  function missed(m) {
    let what = esc(m.lock) + " · ";
    const parts = [];
    if (m.acquired) parts.push(m.acquired + " grant" + (m.acquired === 1 ? "" : "s"));
    if (m.ended) parts.push(m.ended + " hold" + (m.ended === 1 ? "" : "s") + " ended");
    what += parts.join(", ") + " between two polls (counted, not seen)";
    if (m.acquired && m.waited_ms) what += " · waited " + dur(m.waited_ms) + (m.acquired > 1 ? " in all" : "");
    item(m.time, "others", what, "polled");
    if (m.acquired === 1) wait(m.waited_ms);
  }

  function item(time, type, html, cls) {
    const li = document.createElement("li");
    if (cls) li.className = cls;
    li.innerHTML = "<span>" + new Date(time).toTimeString().slice(0, 8) + '</span><span class="ty ty-' + esc(type) + '">' + esc(type) + "</span><span>" + html + "</span>";
    const f = $("feed");
    f.insertBefore(li, f.firstChild);
    while (f.children.length > FEED) f.lastChild.remove();
  }

  function wait(ms) { waits.push(ms); if (waits.length > 60) waits.shift(); chart(); }

  // notes says, where the events are listed, what of other processes the
  // store lets the page see.
  function notes(h) {
    const every = dur(h.poll_ms);
    $("feednote").hidden = !h.poll_ms;
    $("feednote").textContent = h.poll_ms ? "Live: this server's events. ↻ other processes': their grants, waits and ended holds, read from the store every " + every +
      (h.counters ? "; shorter holds are counted, not named." : "; this store keeps no counters, so holds shorter than that are not shown.") +
      " Their refused tries are not listed." : "";
    $("waitnote").hidden = !h.poll_ms || h.counters;
    $("waitnote").textContent = "Other processes' waits: only those seen in the queue (this store keeps no counters).";
  }

  function chart() {
    const c = $("chart"), g = c.getContext("2d");
    const w = c.width, h = c.height;
    g.clearRect(0, 0, w, h);
    if (!waits.length) return;
    const sorted = [...waits].sort((a, b) => a - b);
    const max = Math.max(1, sorted[sorted.length - 1]);
    $("waitstats").textContent = "p50 " + dur(sorted[Math.floor(sorted.length / 2)]) + " · max " + dur(max) + " · last " + waits.length;
    const bw = w / 60;
    waits.forEach((ms, i) => {
      const bh = Math.max(1, Math.sqrt(ms / max) * (h - 6));
      g.fillStyle = ms > 0 ? "#e0b050" : "#4cd083";
      g.fillRect(i * bw + 1, h - bh, bw - 2, bh);
    });
  }

  function connect() {
    if (es) es.close();
    es = new EventSource("/api/events?" + new URLSearchParams({ prefix }));
    $("feed").textContent = ""; // the stream sends the recent events again
    es.addEventListener("hello", (m) => {
      const h = JSON.parse(m.data);
      allowRelease = h.allow_release;
      notes(h);
      $("conn").className = "conn on"; $("conn").textContent = "live";
      load(); // (re)load after (re)connecting: nothing missed in between
    });
    es.addEventListener("lock", (m) => later(() => upsert(JSON.parse(m.data))));
    es.addEventListener("gone", (m) => later(() => gone(JSON.parse(m.data).name)));
    es.addEventListener("event", (m) => feed(JSON.parse(m.data)));
    es.addEventListener("missed", (m) => missed(JSON.parse(m.data)));
    es.addEventListener("lagged", (m) => { feed({ type: "lagged", lock: "stream", time: new Date().toISOString(), reason: JSON.parse(m.data).dropped + " messages dropped; reloaded" }); load(); });
    es.onerror = () => { $("conn").className = "conn off"; $("conn").textContent = "reconnecting"; };
  }

  $("locks").addEventListener("click", async (ev) => {
    const b = ev.target.closest("button[data-release]");
    if (!b) return;
    const name = b.closest(".lock").dataset.name, ref = b.dataset.release;
    let token = sessionStorage.getItem("sleeplock-token") || prompt("Bearer token for release:");
    if (!token) return;
    const res = await fetch("/api/locks/" + name.split("/").map(encodeURIComponent).join("/") + "/release?" + new URLSearchParams({ ref }),
      { method: "POST", headers: { Authorization: "Bearer " + token } });
    if (res.ok) sessionStorage.setItem("sleeplock-token", token);
    else { if (res.status === 401) sessionStorage.removeItem("sleeplock-token"); alert((await res.json()).error); }
  });
  let typing;
  $("prefix").addEventListener("input", () => {
    clearTimeout(typing);
    typing = setTimeout(() => { prefix = $("prefix").value; limit = PAGE; connect(); }, 200);
  });
  $("more").addEventListener("click", () => { limit += PAGE; load(); });

  // stats shows the store's counters (Locks.Stats): the numbers /metrics
  // reports, every process's grants included.
  async function stats() {
    const res = await fetch("/api/stats");
    if (!res.ok) return;
    let rows = (await res.json()).filter((s) => s.name.startsWith(prefix));
    const all = rows.length;
    if (all > STATS_ROWS) rows = rows.sort((a, b) => b.acquisitions + b.refusals - a.acquisitions - a.refusals).slice(0, STATS_ROWS);
    let h = '<colgroup><col class="c-name"><col span="5"><col class="c-wait"></colgroup>' +
      '<tr><th>lock</th><th title="acquired">acq.</th><th title="released">rel.</th><th title="refused">ref.</th><th title="expired">exp.</th><th>lost</th><th title="mean wait of the grants">wait</th></tr>';
    const n = (x) => '<td title="' + x + '">' + compact(x) + "</td>";
    for (const s of rows) {
      h += '<tr><td title="' + esc(s.name) + '">' + esc(s.name) + "</td>" + n(s.acquisitions) + n(s.releases) + n(s.refusals) + n(s.expiries) + n(s.losses) +
        "<td>" + (s.acquisitions ? dur(s.wait_ms / s.acquisitions) : "") + "</td></tr>";
    }
    if (all > rows.length) h += '<tr><td colspan="7" class="muted">the ' + rows.length + " busiest of " + num(all) + ' · all: <a href="/api/stats">/api/stats</a></td></tr>';
    $("stats").innerHTML = h;
  }
  // compact writes a count in at most 5 characters (12.3k, 4.5M).
  function compact(x) {
    if (x < 10000) return String(x);
    for (const [d, u] of [[1e12, "T"], [1e9, "G"], [1e6, "M"], [1e3, "k"]]) if (x >= d) return parseFloat((x / d).toPrecision(3)) + u;
    return String(x);
  }
  setInterval(stats, 2000);
  stats();
  setInterval(tick, 250);
  load(); // at once, not after the stream connects (hello loads again)
  connect();
})();
