// leasekeeper dashboard: ticking times and live regions. Plain JS, no build step; the pages
// work without it. The contract with the server is described in the web package's doc.
(() => {
  "use strict";
  const live = document.getElementById("live");
  const types = ["acquired", "renewed", "released", "expired", "revoked", "rejected"];
  let skew = 0; // server clock minus browser clock, in ms

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

  function calibrate() {
    const el = live && live.querySelector("[data-now]");
    const t = el ? Date.parse(el.dataset.now) : NaN;
    if (!isNaN(t)) skew = t - Date.now();
  }

  function tick() {
    const now = Date.now() + skew;
    for (const el of document.querySelectorAll("[data-expires-at]")) {
      const ms = Date.parse(el.dataset.expiresAt) - now;
      el.textContent = ms > 0 ? rel(ms) : el.dataset.done || "expired";
    }
    for (const el of document.querySelectorAll("time[data-rel]")) {
      el.textContent = rel(Date.parse(el.dateTime) - now);
    }
  }

  // Revoking asks once more (the <details> already asked once without JavaScript).
  document.addEventListener("submit", (e) => {
    const f = e.target.closest("form[data-confirm]");
    if (f && !window.confirm(f.dataset.confirm)) e.preventDefault();
  });

  calibrate();
  setInterval(tick, 1000);
  // On a narrow screen the timeline scrolls sideways: start at its right end, where now is.
  for (const w of document.querySelectorAll(".svg-wrap")) w.scrollLeft = w.scrollWidth;
  if (!live) return;

  let timer = 0, busy = false, again = false, stale = false;

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
    live.querySelectorAll(".table-wrap, .svg-wrap").forEach((w, i) => { w.scrollLeft = s.x[i] || 0; });
    window.scrollTo(window.scrollX, s.y);
    const f = s.focus && live.querySelector(s.focus);
    if (f) f.focus({ preventScroll: true });
  }

  async function reload() {
    if (document.hidden) { stale = true; return; }
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
        tick();
      }
    } catch (_) {
      // Offline or restarting: the next event or poll tries again.
    } finally {
      busy = false;
      if (again) { again = false; schedule(); }
    }
  }

  document.addEventListener("visibilitychange", () => {
    if (!document.hidden && stale) { stale = false; schedule(); }
  });

  if ("watchPrefix" in live.dataset && window.EventSource) {
    const url = "/v1/watch?prefix=" + encodeURIComponent(live.dataset.watchPrefix);
    const wanted = live.dataset.watchEvents ? live.dataset.watchEvents.split(/\s+/) : types;
    let es = null;
    const watch = () => {
      es = new EventSource(url);
      for (const t of wanted) es.addEventListener(t, schedule);
      // The stream starts at its opening: what happened since the render is fetched once.
      es.addEventListener("open", schedule);
    };
    watch();
    // A page kept in the back-forward cache keeps its stream open, and a browser opens only six
    // connections to a host over HTTP/1.1: after six pages the next one would never load.
    window.addEventListener("pagehide", () => { if (es) { es.close(); es = null; } });
    window.addEventListener("pageshow", (e) => { if (e.persisted && !es) watch(); });
  }
  const poll = parseInt(live.dataset.pollMs || "", 10);
  if (poll > 0) setInterval(schedule, poll);
})();
