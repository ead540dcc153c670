// leasekeeper dashboard: ticking times, live regions, connection state, time zone and copy
// buttons. Plain JS, no build step; the pages work without it. The contract with the server
// is described in the web package's doc.
(() => {
  "use strict";
  const live = document.getElementById("live");
  const conn = document.getElementById("conn");
  const announcer = document.getElementById("announce");
  const types = ["acquired", "renewed", "released", "expired", "revoked", "rejected"];
  let skew = 0; // server clock minus browser clock, in ms
  let updated = Date.now(); // browser time of the last data known current
  let connected = true; // false while the server cannot be reached: times stop, the page says so
  let local = false; // absolute times in the browser's time zone rather than UTC
  try { local = localStorage.getItem("lk-tz") === "local"; } catch (_) { /* storage off */ }

  // Same rules as web.RelativeTime and web.Countdown in Go.
  function rel(ms) {
    const a = Math.abs(ms);
    if (a < 1000) return "now";
    const s = a < 60e3 ? Math.floor(a / 1e3) + " s"
      : a < 3600e3 ? Math.floor(a / 60e3) + " min"
      : a < 48 * 3600e3 ? Math.floor(a / 3600e3) + " h"
      : Math.floor(a / 86400e3) + " d";
    return ms > 0 ? "in " + s : s + " ago";
  }

  const months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
  const two = (n) => String(n).padStart(2, "0");
  let zone = "";
  try {
    const p = new Intl.DateTimeFormat(undefined, { timeZoneName: "short" }).formatToParts(new Date());
    zone = (p.find((x) => x.type === "timeZoneName") || {}).value || "";
  } catch (_) { /* no Intl */ }

  // Same rules as web's absTimeShort: the time, with the date when it is not today's, and the zone.
  function abs(t, now) {
    const d = new Date(t), n = new Date(now);
    const get = local
      ? (x) => [x.getFullYear(), x.getMonth(), x.getDate(), x.getHours(), x.getMinutes(), x.getSeconds()]
      : (x) => [x.getUTCFullYear(), x.getUTCMonth(), x.getUTCDate(), x.getUTCHours(), x.getUTCMinutes(), x.getUTCSeconds()];
    const a = get(d), b = get(n);
    let s = two(a[3]) + ":" + two(a[4]) + ":" + two(a[5]);
    if (a[0] !== b[0] || a[1] !== b[1] || a[2] !== b[2]) s = months[a[1]] + " " + a[2] + (a[0] !== b[0] ? ", " + a[0] : "") + " " + s;
    return s + " " + (local ? zone || "local" : "UTC");
  }

  function calibrate() {
    const el = live && live.querySelector("[data-now]");
    const t = el ? Date.parse(el.dataset.now) : NaN;
    if (!isNaN(t)) skew = t - Date.now();
  }

  function absTimes() {
    const now = Date.now() + skew;
    for (const el of document.querySelectorAll("[data-abs]")) el.textContent = abs(Date.parse(el.dataset.abs), now);
    const b = document.getElementById("tz-toggle");
    if (b) {
      b.hidden = false;
      b.textContent = local ? "Times: local" : "Times: UTC";
      b.setAttribute("aria-pressed", String(local));
    }
  }

  function tick() {
    const now = Date.now() + skew;
    if (connected) {
      // While disconnected the data may be stale: counting down toward "expired" on it would
      // tell the reader something the server never said.
      for (const el of document.querySelectorAll("[data-expires-at]")) {
        const ms = Date.parse(el.dataset.expiresAt) - now;
        el.textContent = ms > 0 ? rel(ms) : el.dataset.done || "expired";
        const ttl = parseInt(el.dataset.ttlMs || "", 10);
        const row = el.closest("[data-soon]");
        if (row && ttl > 0) row.dataset.soon = String(ms > 0 && ms < ttl / 5);
        // A held lease whose expiry passed is no longer held: it leaves the list now, not when
        // the sweeper's event refreshes it (a semaphore stays while another slot may be held).
        if (row && ms <= 0 && row.dataset.testid === "lease-row" && !row.querySelector("[data-testid=slots-held]")) row.hidden = true;
      }
      for (const el of document.querySelectorAll("time[data-rel]")) {
        el.textContent = rel(Date.parse(el.dateTime) - now);
      }
    }
    status();
  }

  // The connection line: "live · updated N s ago", or that the page is disconnected.
  function status() {
    if (!conn || !live) return;
    const ago = Math.max(0, Math.floor((Date.now() - updated) / 1000));
    const when = ago < 1 ? "just now" : ago < 60 ? ago + " s ago" : Math.floor(ago / 60) + " min ago";
    const text = connected ? "live · updated " + when : "disconnected — data may be stale (updated " + when + ")";
    conn.hidden = false;
    conn.dataset.state = connected ? "live" : "stale";
    const t = conn.querySelector(".conn-text");
    if (t && t.textContent !== text) t.textContent = text;
    if (conn.title !== text) conn.title = text;
  }

  function say(msg) {
    if (announcer && msg) announcer.textContent = msg;
  }

  function setConnected(ok) {
    if (ok === connected) return;
    connected = ok;
    document.body.classList.toggle("is-stale", !ok);
    say(ok ? "Reconnected: the page is live again." : "Disconnected: the data on this page may be stale.");
    tick();
  }

  // Copy buttons: data-copy holds the text.
  async function copy(btn) {
    const text = btn.dataset.copy;
    let ok = false;
    try {
      await navigator.clipboard.writeText(text);
      ok = true;
    } catch (_) {
      const ta = document.createElement("textarea");
      ta.value = text;
      ta.setAttribute("readonly", "");
      ta.className = "visually-hidden";
      document.body.appendChild(ta);
      ta.select();
      try { ok = document.execCommand("copy"); } catch (_) { ok = false; }
      ta.remove();
    }
    btn.dataset.copied = ok ? "yes" : "no";
    say(ok ? "Copied " + text : "Could not copy");
    setTimeout(() => { delete btn.dataset.copied; }, 1500);
  }

  function enhance() {
    for (const b of document.querySelectorAll("button.copy[hidden]")) b.hidden = false;
    absTimes();
    // On a narrow screen the timeline scrolls sideways: bring now into view, at two thirds of
    // the width, so that the recent past and what comes next both show.
    for (const w of document.querySelectorAll(".svg-wrap")) {
      if (w.dataset.scrolled) continue;
      w.dataset.scrolled = "1";
      const svg = w.querySelector("svg"), now = w.querySelector(".tl-now line");
      if (!svg || !now || w.scrollWidth <= w.clientWidth) continue;
      const x = parseFloat(now.getAttribute("x1")) / svg.viewBox.baseVal.width * svg.getBoundingClientRect().width;
      w.scrollLeft = Math.max(0, x - w.clientWidth * 2 / 3);
    }
  }

  document.addEventListener("click", (e) => {
    const c = e.target.closest("button.copy");
    if (c) { copy(c); return; }
    if (e.target.closest("#tz-toggle")) {
      local = !local;
      try { localStorage.setItem("lk-tz", local ? "local" : "utc"); } catch (_) { /* storage off */ }
      absTimes();
    }
  });

  // Revoking asks once more (the <details> already asked once without JavaScript).
  document.addEventListener("submit", (e) => {
    const f = e.target.closest("form[data-confirm]");
    if (f && !window.confirm(f.dataset.confirm)) e.preventDefault();
  });

  calibrate();
  enhance();
  tick();
  setInterval(tick, 1000);
  if (!live) return;

  let timer = 0, busy = false, again = false, hidden = false, summary = (live.querySelector("[data-summary]") || {}).dataset;
  summary = summary ? summary.summary : "";

  function schedule() {
    clearTimeout(timer);
    timer = setTimeout(reload, 300);
  }

  // Remembers what the swap would lose: focus, open disclosures, scroll positions.
  function snapshot() {
    const a = document.activeElement;
    let focus = null;
    if (a && a !== live && live.contains(a)) {
      focus = a.id ? "#" + CSS.escape(a.id)
        : a.getAttribute("href") ? '[href="' + CSS.escape(a.getAttribute("href")) + '"]'
        : a.dataset.testid ? '[data-testid="' + CSS.escape(a.dataset.testid) + '"]' : null;
    }
    return {
      focus,
      open: [...live.querySelectorAll("details[open][id]")].map((d) => d.id),
      x: [...live.querySelectorAll(".table-wrap, .svg-wrap")].map((w) => w.scrollLeft),
      y: window.scrollY,
    };
  }

  function restore(s) {
    for (const id of s.open) {
      const d = document.getElementById(id);
      if (d && live.contains(d)) d.open = true;
    }
    live.querySelectorAll(".table-wrap, .svg-wrap").forEach((w, i) => { w.scrollLeft = s.x[i] || 0; w.dataset.scrolled = "1"; });
    window.scrollTo(window.scrollX, s.y);
    const f = s.focus && live.querySelector(s.focus);
    if (f) f.focus({ preventScroll: true });
  }

  async function reload() {
    if (document.hidden) { hidden = true; return; }
    if (busy) { again = true; return; }
    busy = true;
    try {
      const res = await fetch(location.href, { headers: { "LK-Fragment": "1" }, cache: "no-store" });
      if (res.ok) {
        const html = await res.text();
        const s = snapshot();
        live.innerHTML = html; // rendered and escaped by the server's templates
        restore(s);
        calibrate();
        enhance();
        updated = Date.now();
        const el = live.querySelector("[data-summary]");
        const next = el ? el.dataset.summary : "";
        if (next && next !== summary) say(next);
        summary = next;
        setConnected(!es || es.readyState === EventSource.OPEN);
        tick();
      } else if (res.status >= 500) {
        setConnected(false);
      }
    } catch (_) {
      // Offline or restarting: say so; the stream's reconnection or the probe tries again.
      setConnected(false);
    } finally {
      busy = false;
      if (again) { again = false; schedule(); }
    }
  }

  document.addEventListener("visibilitychange", () => {
    if (!document.hidden && hidden) { hidden = false; schedule(); }
  });

  let es = null;
  if ("watchPrefix" in live.dataset && window.EventSource) {
    const url = "/v1/watch?prefix=" + encodeURIComponent(live.dataset.watchPrefix);
    const wanted = live.dataset.watchEvents ? live.dataset.watchEvents.split(/\s+/) : types;
    let retry = 0;
    const watch = () => {
      es = new EventSource(url);
      for (const t of wanted) es.addEventListener(t, schedule);
      // The stream starts at its opening: what happened since the render is fetched once.
      es.addEventListener("open", schedule);
      es.addEventListener("error", () => {
        setConnected(false);
        // The browser retries a dropped stream by itself; one it gave up on (an error answer)
        // is opened again here, later each time.
        if (es && es.readyState === EventSource.CLOSED) {
          es = null;
          clearTimeout(retry);
          retry = setTimeout(() => { if (!es) watch(); }, 2000);
        }
      });
    };
    watch();
    // A page kept in the back-forward cache keeps its stream open, and a browser opens only six
    // connections to a host over HTTP/1.1: after six pages the next one would never load.
    window.addEventListener("pagehide", () => { if (es) { es.close(); es = null; } });
    window.addEventListener("pageshow", (e) => { if (e.persisted && !es) watch(); });
    // An open stream with no events says nothing changed; refresh now and then anyway, so that
    // "updated" stays true and a server that hangs without closing the stream is noticed.
    setInterval(() => { if (connected) schedule(); }, 30000);
  }
  const poll = parseInt(live.dataset.pollMs || "", 10);
  if (poll > 0) setInterval(schedule, poll);
  // While disconnected, probe with a fragment request every 3 s.
  setInterval(() => { if (!connected) schedule(); }, 3000);
  window.addEventListener("offline", () => setConnected(false));
})();
