// The admin page: polls /status (every 2 s), /bans (every 10 s) and /history (when the
// gateway has taken a new sample, every 5 s) on this listener and draws them. The overall
// charts are the gateway's own history (the last 15 minutes, there at once in a tab
// opened late); the per-zone charts are what this tab has seen. Every text that came from
// a request (keys are client input) goes in with textContent, never as markup; the page's
// Content-Security-Policy allows no other script.
"use strict";

const POLL_MS = 2000;
const BANS_EVERY = 5; // polls
const KEEP = 150; // points per zone chart: five minutes
// The overall charts: a name, a colour and how a /history sample gives the value.
const CLASSES = ["1xx", "2xx", "3xx", "4xx", "5xx"];
const CLASS_COLORS = ["#8c959f", "#1a7f37", "#0969da", "#9a6700", "#cf222e"];
const REQUESTS = CLASSES.map((c, i) => [c, CLASS_COLORS[i], (s) => s.requests[c]]);
const LIMITS = [
  ["zone delays", "#9a6700", (s) => s.delayed],
  ["zone rejections", "#cf222e", (s) => s.rejected],
  ["upstream 5xx", "#8250df", (s) => s.upstream_failures["5xx"]],
  ["upstream errors", "#0550ae", (s) =>
    s.upstream_failures.timeout + s.upstream_failures.refused + s.upstream_failures.broken],
];
const CONNECTIONS = [["open connections", "#0969da", (s) => s.connections]];
const SERIES = [
  ["passed", "#1a7f37", (d) => d.passed + d.soft],
  ["delayed", "#9a6700", (d) => d.delayed],
  ["rejected", "#cf222e", (d) => d.rejected + d.banned],
  ["dry run", "#8250df", (d) => d.passed_dry_run + d.delayed_dry_run + d.rejected_dry_run],
];

const page = {
  token: sessionStorage.getItem("tollgate-admin-token") || "",
  previous: null, // the /status the last point was taken from, and when it came
  history: new Map(), // zone -> [{t, rates: [per SERIES]}]
  bans: null,
  polls: 0,
  polling: false, // a poll is under way: the next one waits its turn
  said: new Map(), // an action's path -> what its button says, for a few seconds
  actionProblem: "", // what the last button press ran into, until the next one
  pollProblem: "", // what the last poll ran into, until one goes through
  gateway: null, // the last /history: the gateway's samples, oldest first
  historyAt: 0, // when it was fetched
};

// An element with attributes and children; strings become text nodes.
function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs || {})) {
    if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
    else if (name === "class") node.className = value;
    else node.setAttribute(name, value);
  }
  for (const child of children) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function fill(id, ...children) {
  const body = document.querySelector(`#${id} .body`);
  body.replaceChildren(...children);
}

// Shows what went wrong: a button press's problem stays until the next press (or a new
// token); a poll's, until a poll goes through.
function showProblem() {
  const text = page.actionProblem || page.pollProblem;
  const box = document.getElementById("problem");
  box.hidden = !text;
  box.textContent = text;
}

function authorization() {
  return page.token ? { Authorization: "Bearer " + page.token } : {};
}

async function call(method, path) {
  const response = await fetch(path, { method, headers: authorization(), cache: "no-store" });
  if (response.status === 401) {
    throw new Error("the admin API wants its token for this: enter it above");
  }
  if (response.status === 403) {
    throw new Error(await response.text());
  }
  return response;
}

function table(head, rows) {
  return el("table", {},
    el("thead", {}, el("tr", {}, ...head.map((h) => el("th", {}, h)))),
    el("tbody", {}, ...rows));
}

// A point per zone from the counts since the last point; none until a second has
// passed (a poll after a button press comes early), so that every rate is over a second
// or more. Whether a point was taken.
function rates(doc, now) {
  if (!page.previous) return true;
  const seconds = (now - page.previous.at) / 1000;
  if (seconds < 1) return false;
  for (const [zone, info] of Object.entries(doc.zones)) {
    const before = page.previous.doc.zones[zone];
    if (!before) continue;
    const point = SERIES.map(([, , pick]) =>
      Math.max(0, (pick(info.decisions) - pick(before.decisions)) / seconds));
    const points = page.history.get(zone) || [];
    points.push({ t: now, rates: point });
    while (points.length > KEEP) points.shift();
    page.history.set(zone, points);
  }
  return true;
}

// Clock labels every `step` ms: the first step (of 30 s to 5 min) that gives at most six.
function ticks(from, to) {
  const steps = [30e3, 60e3, 120e3, 300e3, 600e3];
  const step = steps.find((st) => (to - from) / st <= 6) || steps[steps.length - 1];
  const out = [];
  for (let t = Math.ceil(from / step) * step; t <= to; t += step) out.push(t);
  return { step, out };
}

function clock(t, seconds) {
  const options = { hour: "2-digit", minute: "2-digit", hour12: false };
  if (seconds) options.second = "2-digit";
  return new Date(t).toLocaleTimeString([], options);
}

// A line chart of `series` ([name, colour]) over `points` ({t, v: [per series]}), the
// `span` ms up to `end`, with a value axis and clock labels under it. A gap of more than
// `gap` ms between points breaks the line. The canvas's data attributes say what it drew
// (what a test reads).
function lineChart(attrs, [W, H], points, series, span, end, gap) {
  const [L, B, T] = [44, 18, 8];
  const canvas = el("canvas", { width: String(W), height: String(H), ...attrs });
  const ctx = canvas.getContext("2d");
  const from = end - span;
  const shown = points.filter((p) => p.t >= from);
  const top = Math.max(1, ...shown.map((p) => Math.max(...p.v)));
  const x = (t) => L + ((t - from) / span) * (W - L - 4);
  const y = (v) => H - B - (v / top) * (H - B - T);
  ctx.font = "11px sans-serif";
  ctx.lineWidth = 1;
  for (const v of [0, top / 2, top]) {
    ctx.strokeStyle = "#eaeef2";
    ctx.beginPath(); ctx.moveTo(L, y(v)); ctx.lineTo(W, y(v)); ctx.stroke();
    ctx.fillStyle = "#57606a";
    ctx.textAlign = "right";
    ctx.fillText(v.toFixed(top < 10 ? 1 : 0), L - 4, y(v) + 4);
  }
  const { step, out } = ticks(from, end);
  ctx.textAlign = "center";
  const labels = out.map((t) => {
    const text = clock(t, step < 60e3);
    ctx.strokeStyle = "#d0d7de";
    ctx.beginPath(); ctx.moveTo(x(t), H - B); ctx.lineTo(x(t), H - B + 4); ctx.stroke();
    ctx.fillText(text, Math.min(W - 24, Math.max(L + 20, x(t))), H - 4);
    return text;
  });
  series.forEach(([, color], s) => {
    ctx.strokeStyle = color;
    ctx.lineWidth = 1.5;
    ctx.beginPath();
    shown.forEach((p, i) => {
      const broken = i === 0 || p.t - shown[i - 1].t > gap;
      if (broken) ctx.moveTo(x(p.t), y(p.v[s]));
      else ctx.lineTo(x(p.t), y(p.v[s]));
      // A point with no neighbour on either side would draw nothing: a dot.
      const alone = broken && (i === shown.length - 1 || shown[i + 1].t - p.t > gap);
      if (alone) {
        ctx.fillStyle = color;
        ctx.fillRect(x(p.t) - 1.5, y(p.v[s]) - 1.5, 3, 3);
      }
    });
    ctx.stroke();
  });
  canvas.dataset.points = String(shown.length);
  canvas.dataset.totals = JSON.stringify(series.map((_, s) =>
    shown.reduce((sum, p) => sum + p.v[s], 0)));
  canvas.dataset.labels = JSON.stringify(labels);
  return canvas;
}

function chart(zone) {
  const points = (page.history.get(zone) || []).map((p) => ({ t: p.t, v: p.rates }));
  const end = points.length ? points[points.length - 1].t : Date.now();
  return lineChart({ "data-zone": zone }, [600, 170], points, SERIES, (KEEP - 1) * POLL_MS, end,
    3 * POLL_MS);
}

function legend(zone) {
  const newest = (page.history.get(zone) || []).at(-1);
  const last = newest ? newest.rates : SERIES.map(() => 0);
  return el("div", { class: "legend" }, ...SERIES.map(([name], s) =>
    el("span", {}, el("i", { class: `s${s}` }), `${name} ${last[s].toFixed(1)}/s`)));
}

// Presses a button: calls `path`, keeps what came of it on the button for a few seconds
// (tables are drawn anew every poll), and fetches the bans afresh.
async function act(method, path) {
  page.said.set(path, { text: "…", until: Date.now() + 5000 });
  try {
    const response = await call(method, path);
    page.said.set(path, { text: response.ok ? "done" : `${response.status}`, until: Date.now() + 5000 });
    page.actionProblem = "";
  } catch (error) {
    page.said.delete(path);
    page.actionProblem = error.message;
  }
  showProblem();
  page.bans = null;
  await poll();
}

function button(label, method, path) {
  const said = page.said.get(path);
  const shown = said && said.until > Date.now() ? said.text : null;
  const node = el("button", { type: "button" }, shown || label);
  node.disabled = Boolean(shown);
  node.addEventListener("click", () => {
    node.disabled = true;
    act(method, path);
  });
  return node;
}

function zoneSection(zone, info) {
  const limited = info.top_limited.map((row) => {
    const cut = row.key.endsWith("…");
    const reset = cut
      ? el("span", { class: "muted" }, "key cut")
      : button("reset", "DELETE", `/zones/${encodeURIComponent(zone)}/keys/${encodeURIComponent(row.key)}`);
    return el("tr", { class: "limited" },
      el("td", { class: "key" }, row.key), el("td", { class: "num" }, row.rejected), el("td", {}, reset));
  });
  const banned = ((page.bans && page.bans.zones[zone]) || { bans: [] }).bans.map((ban) =>
    el("tr", { class: "ban" },
      el("td", { class: "key" }, ban.key),
      el("td", { class: "num" }, `${ban.seconds_left} s`),
      el("td", {}, ban.why),
      el("td", {}, button("lift", "DELETE", `/bans/${encodeURIComponent(zone)}/${encodeURIComponent(ban.key)}`))));
  const factor = info.rate_factor === undefined ? "" : ` · rates ×${info.rate_factor}`;
  return el("div", { class: "zone", "data-zone": zone },
    el("div", {},
      el("h3", {}, zone, el("span", { class: "muted" },
        ` ${info.algorithm} · ${info.keys} key${info.keys === 1 ? "" : "s"}${factor}`)),
      chart(zone), legend(zone)),
    el("div", {},
      limited.length ? table(["most limited, last minute", "rejected", ""], limited)
        : el("p", { class: "muted" }, "no key limited in the last minute"),
      banned.length ? table(["banned", "left", "why", ""], banned) : null));
}

// One overall chart from the gateway's history, with its legend (the newest values).
function trafficChart(name, title, series, unit) {
  const history = page.gateway;
  const samples = history ? history.samples : [];
  const interval = history ? history.interval_ms : 5000;
  const span = (history ? history.capacity : 180) * interval;
  const points = samples.map((s) => ({ t: s.at_ms, v: series.map(([, , pick]) => pick(s)) }));
  const end = points.length ? Math.max(points[points.length - 1].t, Date.now()) : Date.now();
  const last = points.length ? points[points.length - 1].v : series.map(() => 0);
  return el("div", { class: "chart" },
    el("h3", {}, title),
    lineChart({ "data-chart": name }, [400, 180], points, series, span, end, 2.5 * interval),
    el("div", { class: "legend" }, ...series.map(([label, color], s) =>
      el("span", {}, swatch(color), `${label} ${last[s].toFixed(unit === "/s" ? 1 : 0)}${unit}`))));
}

// A legend's colour: set through the style object, which the page's policy allows (a
// style attribute it would not).
function swatch(color) {
  const node = el("i", {});
  node.style.background = color;
  return node;
}

function trafficSection() {
  const samples = page.gateway ? page.gateway.samples : [];
  const newest = samples[samples.length - 1];
  let headline = "no sample yet: the gateway takes one every 5 seconds";
  if (newest) {
    const total = CLASSES.reduce((sum, c) => sum + newest.requests[c], 0);
    const errors = newest.requests["5xx"];
    const share = total ? ` (${((100 * errors) / total).toFixed(1)} %)` : "";
    const every = page.gateway.interval_ms / 1000;
    headline = `${total.toFixed(1)} requests/s · 5xx ${errors.toFixed(1)}/s${share} · ` +
      `${newest.connections} open connections, at ${clock(newest.at_ms, true)} ` +
      `(sampled every ${every} s since ${clock(samples[0].at_ms, true)})`;
  }
  return el("div", {},
    el("p", { id: "traffic-headline" }, headline),
    el("div", { class: "charts" },
      trafficChart("requests", "Requests per second, by status", REQUESTS, "/s"),
      trafficChart("limits", "Limits and upstream failures per second", LIMITS, "/s"),
      trafficChart("connections", "Open connections", CONNECTIONS, "")));
}

// The configuration in force, and the last reload that failed: a red banner while it is
// the latest reload, a past entry (with its time) once a good reload has come after it.
function reloadsSection(doc) {
  const failure = doc.reloads.last_failure;
  let shown = null;
  if (failure && !failure.past) {
    shown = el("div", { id: "reload-failing", class: "banner" },
      el("p", { class: "bad" }, `the last reload failed, at ${failure.at}: the file on disk is not in force`),
      el("pre", { id: "reload-error" }, failure.error));
  } else if (failure) {
    shown = el("details", { id: "reload-past" },
      el("summary", { class: "muted" }, `past failure at ${failure.at} (a later reload succeeded)`),
      el("pre", {}, failure.error));
  }
  return el("div", {},
    el("p", {}, `generation ${doc.generation} · file sha256 ${doc.config_sha256.slice(0, 12)}… · reloads `,
      el("span", { class: "ok" }, `${doc.reloads.ok} ok`), ", ",
      el("span", { class: doc.reloads.failed ? "bad" : "" }, `${doc.reloads.failed} failed`)),
    shown);
}

function upstreamsSection(doc) {
  const rows = [];
  for (const [group, servers] of Object.entries(doc.upstreams)) {
    const load = doc.upstream_load[group] || {};
    const latency = load.latency_ms || {};
    const gate = doc.upstream_concurrency[group];
    servers.forEach((server, i) => rows.push(el("tr", {},
      el("td", {}, i ? "" : group),
      el("td", { class: "key" }, server.server),
      el("td", { class: server.healthy ? "ok" : "bad" }, server.healthy ? "up" : `down (${server.fails} fails)`),
      el("td", { class: "num" }, i ? "" : load.in_flight),
      el("td", { class: "num" }, i || latency.p90 === undefined ? "" : latency.p90.toFixed(1)),
      el("td", { class: "num" }, i || load.failure_ratio === undefined ? "" : `${(100 * load.failure_ratio).toFixed(1)} %`),
      el("td", {}, i || !gate ? "" : `${gate.mode} ${gate.in_flight}/${gate.limit}, ${gate.queue} waiting`))));
  }
  return table(["group", "server", "health", "in flight", "p90 ms", "failed", "gate"], rows);
}

function certificatesSection(doc) {
  const now = Date.now();
  const rows = Object.entries(doc.certificates || {}).map(([name, notAfter]) => {
    const days = Math.floor((Date.parse(notAfter) - now) / 86400000);
    return el("tr", {}, el("td", { class: "key" }, name), el("td", {}, notAfter),
      el("td", { class: days < 14 ? "bad" : "ok" }, `${days} days`));
  });
  const listeners = [...doc.listeners, ...doc.tls_listeners.map((a) => `${a} (TLS)`)].join(", ");
  return el("div", {}, el("p", {}, `listening on ${listeners}`),
    rows.length ? table(["certificate", "valid until", "left"], rows) : el("p", { class: "muted" }, "no certificates"));
}

async function poll() {
  if (page.polling) return;
  page.polling = true;
  try {
    const response = await call("GET", "/status");
    const doc = await response.json();
    const now = Date.now();
    if (rates(doc, now)) page.previous = { doc, at: now };
    if (page.polls % BANS_EVERY === 0 || page.bans === null) {
      page.bans = await (await call("GET", "/bans")).json();
    }
    const every = page.gateway ? page.gateway.interval_ms : 0;
    if (!page.gateway || now - page.historyAt >= every) {
      page.gateway = await (await call("GET", "/history")).json();
      page.historyAt = now;
    }
    page.polls += 1;
    for (const [path, said] of page.said) if (said.until <= now) page.said.delete(path);
    document.getElementById("summary").textContent =
      `generation ${doc.generation} · ${Object.keys(doc.zones).length} zones · updated ${clock(now, true)}`;
    fill("traffic", trafficSection());
    fill("reloads", reloadsSection(doc));
    fill("zones", ...Object.entries(doc.zones).map(([zone, info]) => zoneSection(zone, info)));
    fill("upstreams", upstreamsSection(doc));
    fill("certificates", certificatesSection(doc));
    page.pollProblem = "";
  } catch (error) {
    page.pollProblem = error.message;
  } finally {
    showProblem();
    page.polling = false;
  }
}

// "Look up a key": each zone's state of it, and what its next request would get at each
// location that limits by the zone (GET /keys/KEY, which changes nothing).
async function lookUp(key) {
  const response = await call("GET", "/keys/" + encodeURIComponent(key));
  const doc = await response.json();
  const rows = [];
  for (const zone of doc.zones) {
    const state = zone.banned_ms !== undefined ? `banned, ${(zone.banned_ms / 1000).toFixed(1)} s left`
      : zone.stored ? zone.state : "not seen (fresh)";
    const nexts = zone.next.length ? zone.next : [null];
    nexts.forEach((next, i) => {
      const verdict = !next ? "" : next.wait_ms === undefined ? next.verdict
        : `${next.verdict} (${(next.wait_ms / 1000).toFixed(3)} s)`;
      const good = next && next.verdict === "pass";
      rows.push(el("tr", {},
        el("td", {}, i ? "" : zone.zone + (zone.redis ? " (Redis)" : "")),
        el("td", { class: "key" }, i ? "" : state),
        el("td", {}, next ? next.location : "no location limits by it"),
        el("td", { class: next ? (good ? "ok" : "bad") : "muted" }, verdict),
        el("td", { class: "num" }, next ? next.remaining : "")));
    });
  }
  fill("lookup", el("p", {}, "key ", el("code", {}, doc.key)),
    table(["zone", "its state", "location", "next request", "left after it"], rows));
}

document.getElementById("lookup-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  const key = document.getElementById("lookup-key").value;
  try {
    await lookUp(key);
    page.actionProblem = "";
  } catch (error) {
    page.actionProblem = error.message;
  }
  showProblem();
});

document.getElementById("token-form").addEventListener("submit", (event) => {
  event.preventDefault();
  page.token = document.getElementById("token").value.trim();
  page.actionProblem = "";
  showProblem();
  sessionStorage.setItem("tollgate-admin-token", page.token);
  document.getElementById("token-state").textContent = page.token ? "set for this tab" : "none";
  poll();
});
document.getElementById("token-state").textContent = page.token ? "set for this tab" : "";
poll();
setInterval(poll, POLL_MS);
