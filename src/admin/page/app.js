// The admin page: polls /status (every 2 s) and /bans (every 10 s) on this listener and
// draws them. Every text that came from a request (keys are client input) goes in with
// textContent, never as markup; the page's Content-Security-Policy allows no other script.
"use strict";

const POLL_MS = 2000;
const BANS_EVERY = 5; // polls
const KEEP = 150; // points per chart: five minutes
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

function chart(zone) {
  const canvas = el("canvas", { width: "600", height: "140", "data-zone": zone });
  const points = page.history.get(zone) || [];
  canvas.dataset.points = String(points.length);
  // Each series' rates added up (what a test reads: is a line off the floor).
  canvas.dataset.totals = JSON.stringify(SERIES.map((_, s) =>
    points.reduce((sum, point) => sum + point.rates[s], 0)));
  const ctx = canvas.getContext("2d");
  const top = Math.max(1, ...points.map((point) => Math.max(...point.rates)));
  const newest = points.length ? points[points.length - 1].t : 0;
  const span = (KEEP - 1) * POLL_MS;
  ctx.font = "11px sans-serif";
  ctx.fillStyle = "#57606a";
  ctx.fillText(`${top.toFixed(top < 10 ? 1 : 0)} /s`, 4, 12);
  SERIES.forEach(([, color], s) => {
    ctx.strokeStyle = color;
    ctx.lineWidth = 1.5;
    ctx.beginPath();
    points.forEach((point, i) => {
      const x = 600 - ((newest - point.t) / span) * 600;
      const y = 136 - (point.rates[s] / top) * 118;
      if (i === 0) ctx.moveTo(x, y);
      else ctx.lineTo(x, y);
    });
    ctx.stroke();
  });
  return canvas;
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

function reloadsSection(doc) {
  const failure = doc.reloads.last_failure;
  return el("div", {},
    el("p", {}, `generation ${doc.generation} · file sha256 ${doc.config_sha256.slice(0, 12)}… · reloads `,
      el("span", { class: "ok" }, `${doc.reloads.ok} ok`), ", ",
      el("span", { class: doc.reloads.failed ? "bad" : "" }, `${doc.reloads.failed} failed`)),
    failure ? el("div", {}, el("p", { class: "bad" }, `last failure at ${failure.at}:`),
      el("pre", { id: "reload-error" }, failure.error)) : null);
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
    page.polls += 1;
    for (const [path, said] of page.said) if (said.until <= now) page.said.delete(path);
    document.getElementById("summary").textContent =
      `generation ${doc.generation} · ${Object.keys(doc.zones).length} zones · updated ${new Date(now).toLocaleTimeString()}`;
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
