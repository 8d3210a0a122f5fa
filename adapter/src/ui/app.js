// engram's memory dashboard. Talks to /api with the token the person
// entered (sessionStorage: this tab only), sent as a bearer header. Stored
// text is untrusted: it is only ever set with textContent (or as an
// attribute value through the DOM), never parsed as HTML.
//
// Every view has an address in the hash (#/memories?q=…&page=2,
// #/memory/<id>, #/entity/<name>, …): following a link pushes history,
// Back returns to the previous view, and reloading shows the same view.
"use strict";

const $ = (id) => document.getElementById(id);
const PAGE_SIZE = 10;

const state = {
  me: null, // {owner, platform} of the token itself
  current: null, // the memory shown in the detail panel
  lastList: "#/memories", // the memory list the detail panel belongs to
  listKey: null, // the /api/browse query the list pane shows
  seq: 0, // the latest navigation: older ones stop rendering
  flash: null, // what the next view says once shown
};

// ---- the API --------------------------------------------------------------

function actAs() {
  return sessionStorage.getItem("engram.actAs") || "";
}

// `as`: the owner to act for (a platform token), "" for the token's own,
// undefined for the one chosen in this tab.
function headers(as) {
  const h = { Authorization: "Bearer " + sessionStorage.getItem("engram.token"), "Content-Type": "application/json" };
  const owner = as === undefined ? actAs() : as;
  if (owner) h["X-User-Id"] = owner;
  return h;
}

async function api(method, path, body, as) {
  const r = await fetch(path, { method, headers: headers(as), body: body ? JSON.stringify(body) : undefined });
  if (r.status === 204) return null;
  const data = await r.json().catch(() => ({}));
  if (!r.ok) throw new Error(data.error || r.statusText);
  return data;
}

// ---- small DOM helpers (text only) ----------------------------------------

function el(tag, text, cls) {
  const e = document.createElement(tag);
  if (text !== undefined && text !== null) e.textContent = String(text);
  if (cls) e.className = cls;
  return e;
}

function link(href, text, cls) {
  const a = el("a", text, cls);
  a.href = href;
  return a;
}

function button(text, cls, onClick) {
  const b = el("button", text, cls);
  b.type = "button";
  b.addEventListener("click", onClick);
  return b;
}

function row(cells) {
  const tr = el("tr");
  for (const c of cells) {
    const td = el("td");
    if (c instanceof Node) td.appendChild(c);
    else td.textContent = c === undefined || c === null ? "" : String(c);
    tr.appendChild(td);
  }
  return tr;
}

// A bar (a <meter>: no inline style needed); `quota`: it turns amber past 80%.
function meter(value, max, quota) {
  const m = el("meter");
  m.min = 0;
  m.max = Math.max(Number(max) || 0, 1);
  m.value = Number(value) || 0;
  if (quota) {
    m.high = m.max * 0.8;
    m.optimum = 0;
  }
  return m;
}

function num(n) {
  return n === null || n === undefined ? "" : Number(n).toLocaleString("en-US");
}

function bytes(n) {
  let v = Number(n) || 0;
  for (const unit of ["B", "KiB", "MiB", "GiB"]) {
    if (v < 1024 || unit === "GiB") return (Number.isInteger(v) ? v : v.toFixed(1)) + " " + unit;
    v /= 1024;
  }
  return String(n);
}

function tags(parent, list) {
  for (const t of list || []) parent.appendChild(el("span", t, "tag"));
}

function status(text, isError) {
  $("status").textContent = text;
  $("status").className = isError ? "error" : "";
}

// A timestamp as its date and minute, in UTC ("2026-05-06 15:00").
function when(t) {
  return t ? String(t).replace("T", " ").slice(0, 16) : "";
}

// The same to the second ("2026-05-06 15:00:07").
function whenExactly(t) {
  return t ? String(t).replace("T", " ").slice(0, 19) : "";
}

function day(t) {
  return t ? String(t).slice(0, 10) : "";
}

function plural(n, one, many) {
  return n + " " + (Number(n) === 1 ? one : many || one + "s");
}

function splitList(text) {
  return String(text || "").split(",").map((t) => t.trim()).filter(Boolean);
}

// ---- addresses --------------------------------------------------------------

function hashFor(view, arg, params) {
  let h = "#/" + view;
  if (arg !== undefined && arg !== null) h += "/" + encodeURIComponent(arg);
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params || {})) if (v !== undefined && v !== null && v !== "") q.set(k, v);
  const s = q.toString();
  return s ? h + "?" + s : h;
}

function parseHash() {
  const raw = location.hash.replace(/^#\/?/, "");
  const at = raw.indexOf("?");
  const path = at < 0 ? raw : raw.slice(0, at);
  const params = new URLSearchParams(at < 0 ? "" : raw.slice(at + 1));
  const parts = path.split("/").map((p) => {
    try {
      return decodeURIComponent(p);
    } catch (e) {
      return p;
    }
  });
  return { view: parts[0] || "memories", arg: parts.length > 1 ? parts.slice(1).join("/") : null, params };
}

const VIEWS = {
  memories: { section: "memories", nav: "memories", render: renderMemories },
  memory: { section: "memories", nav: "memories", render: renderMemory },
  entities: { section: "entities", nav: "entities", render: renderEntities },
  entity: { section: "entity", nav: "entities", render: renderEntity },
  owners: { section: "owners", nav: "owners", render: renderOwners },
  stats: { section: "stats", nav: "stats", render: renderStats },
  workspaces: { section: "workspaces", nav: "workspaces", render: renderWorkspaces },
  workspace: { section: "workspace", nav: "workspaces", render: renderWorkspace },
  sessions: { section: "sessions", nav: "sessions", render: renderSessions },
  session: { section: "session", nav: "sessions", render: renderSession },
  resources: { section: "resources", nav: "resources", render: renderResources },
};

async function route() {
  if (!sessionStorage.getItem("engram.token")) {
    showApp(false);
    return;
  }
  showApp(true);
  const seq = ++state.seq;
  const alive = () => seq === state.seq;
  const r = parseHash();
  const view = VIEWS[r.view];
  if (!view) {
    history.replaceState(null, "", "#/memories");
    return route();
  }
  for (const s of document.querySelectorAll("section.view")) s.hidden = s.id !== "view-" + view.section;
  // the list is kept only while going between it and its memories
  if (view.section !== "memories") state.listKey = null;
  for (const a of document.querySelectorAll("#nav a")) a.classList.toggle("active", a.dataset.view === view.nav);
  status(state.flash || "");
  state.flash = null;
  try {
    await view.render(r, alive);
  } catch (e) {
    if (alive()) status(e.message, true);
  }
}

// ---- log in ---------------------------------------------------------------

function showApp(on) {
  $("login").hidden = on;
  $("app").hidden = !on;
  $("logout").hidden = !on;
  if (!on) $("who").textContent = "";
}

function showWho() {
  const me = state.me;
  const who = $("who");
  who.replaceChildren();
  if (!me) return;
  who.appendChild(el("span", me.owner || "local owner", "owner"));
  if (me.platform) who.appendChild(el("span", "platform token", "badge"));
  if (actAs() && actAs() !== me.owner) {
    const acting = el("span", "acting as ", "acting");
    acting.appendChild(link("#/owners", actAs(), "owner"));
    who.appendChild(acting);
  }
}

async function whoAmI() {
  state.me = await api("GET", "/api/me", undefined, "");
  showWho();
}

async function login(event) {
  event.preventDefault();
  sessionStorage.setItem("engram.token", $("token").value.trim());
  sessionStorage.setItem("engram.actAs", $("act-as").value.trim());
  try {
    await whoAmI();
    if (actAs() && !state.me.platform) throw new Error("acting as another owner needs a platform token");
    await api("GET", "/api/browse?page_size=1");
  } catch (e) {
    sessionStorage.clear();
    state.me = null;
    $("login-error").textContent = "Login failed: " + e.message;
    return;
  }
  $("login-error").textContent = "";
  $("token").value = "";
  $("act-as").value = "";
  state.listKey = null;
  if (!location.hash || location.hash === "#" || location.hash === "#/") history.replaceState(null, "", "#/memories");
  await route();
}

function logout() {
  sessionStorage.clear();
  state.me = null;
  state.listKey = null;
  showApp(false);
}

// ---- memories ---------------------------------------------------------------

// The filters of a list address, and the /api/browse query for them.
const FILTERS = [["q", "query"], ["kind", "f-kind"], ["status", "f-status"], ["tags", "f-tags"],
                 ["entity", "f-entity"], ["ns", "f-namespace"], ["valid_at", "f-valid-at"],
                 ["from", "f-from"], ["to", "f-to"]];

function browseQuery(params) {
  const q = new URLSearchParams();
  const put = (k, v) => { if (v) q.append(k, v); };
  put("q", params.get("q"));
  put("kind", params.get("kind"));
  put("status", params.get("status"));
  for (const t of splitList(params.get("tags"))) q.append("tag", t);
  put("entity", params.get("entity"));
  put("namespace", params.get("ns"));
  put("valid_at", params.get("valid_at"));
  put("created_after", params.get("from"));
  const to = params.get("to");
  if (to && !isNaN(Date.parse(to + "T00:00:00Z"))) {
    // "to" is a day, included: written before the next one
    put("created_before", new Date(Date.parse(to + "T00:00:00Z") + 86400000).toISOString().slice(0, 10));
  }
  q.set("page", String(Math.max(parseInt(params.get("page") || "1", 10) || 1, 1)));
  q.set("page_size", String(PAGE_SIZE));
  return q.toString();
}

function listParams(params) {
  const p = {};
  for (const [k] of FILTERS) if (params.get(k)) p[k] = params.get(k);
  return p;
}

function submitFilters(event) {
  event.preventDefault();
  const p = {};
  for (const [k, id] of FILTERS) {
    const v = $(id).value.trim();
    if (v) p[k] = v;
  }
  location.hash = hashFor("memories", null, p);
}

async function renderMemories(r, alive) {
  state.lastList = location.hash || "#/memories";
  showDetail(false);
  state.current = null;
  await showList(r.params, alive);
}

async function showList(params, alive) {
  for (const [k, id] of FILTERS) $(id).value = params.get(k) || "";
  const query = browseQuery(params);
  const page = parseInt(new URLSearchParams(query).get("page"), 10);
  const base = listParams(params);
  if (state.listKey === query) return; // already shown
  let d;
  try {
    d = await api("GET", "/api/browse?" + query);
  } catch (e) {
    if (!alive()) return;
    $("results").replaceChildren(el("li", "Could not list memories: " + e.message, "error"));
    $("timeline").replaceChildren();
    state.listKey = null;
    throw e;
  }
  if (!alive()) return;
  state.listKey = query;
  const ul = $("results");
  ul.replaceChildren();
  for (const m of d.memories) ul.appendChild(memoryItem(m));
  if (!d.memories.length) ul.appendChild(el("li", "No memories here.", "empty"));
  timeline(d.memories);
  const first = (page - 1) * PAGE_SIZE + 1;
  $("list-summary").textContent = d.memories.length
    ? (d.searched ? "Best matches " : "Newest first: ") + first + "–" + (first + d.memories.length - 1)
    : "";
  $("page-number").textContent = "page " + page;
  pager($("prev-page"), page > 1, hashFor("memories", null, { ...base, page: page - 1 > 1 ? page - 1 : "" }));
  pager($("next-page"), d.has_more, hashFor("memories", null, { ...base, page: page + 1 }));
}

function pager(a, on, href) {
  a.href = on ? href : "#" + location.hash.slice(1);
  a.classList.toggle("disabled", !on);
  a.setAttribute("aria-disabled", on ? "false" : "true");
  a.tabIndex = on ? 0 : -1;
}

function memoryItem(m) {
  const li = el("li", null, "memory");
  const a = link("#/memory/" + encodeURIComponent(m.id), m.content, "memory-link");
  a.dataset.id = m.id;
  li.appendChild(a);
  const meta = el("div", null, "meta");
  meta.appendChild(el("span", m.kind, "kind kind-" + m.kind));
  if (m.status && m.status !== "active") meta.appendChild(el("span", m.status, "badge"));
  if (m.valid_to && Date.parse(m.valid_to) <= Date.now()) meta.appendChild(el("span", "no longer holds", "badge"));
  meta.appendChild(el("time", when(m.occurred_at || m.created_at)));
  if (m.namespace && m.namespace.length) meta.appendChild(el("span", m.namespace.join(".") + " / " + m.key, "source"));
  if (m.source && m.source !== "memory") meta.appendChild(el("span", m.source, "source"));
  tags(meta, m.tags);
  li.appendChild(meta);
  return li;
}

// The page's memories by when they happened, oldest first.
function timeline(items) {
  const ol = $("timeline");
  ol.replaceChildren();
  const dated = items.filter((h) => h.occurred_at).sort((a, b) => String(a.occurred_at).localeCompare(String(b.occurred_at)));
  for (const h of dated) {
    const li = el("li", null, "timeline-item");
    li.appendChild(el("time", when(h.occurred_at)));
    li.appendChild(el("span", " " + h.content));
    ol.appendChild(li);
  }
}

function showDetail(on) {
  $("detail").hidden = !on;
  document.querySelector("#view-memories .split").classList.toggle("with-detail", on);
}

async function renderMemory(r, alive) {
  const listHash = state.lastList || "#/memories";
  const params = new URLSearchParams(listHash.includes("?") ? listHash.slice(listHash.indexOf("?") + 1) : "");
  $("detail-close").href = listHash;
  // the list the memory was opened from stays beside it
  const list = showList(params, alive).catch(() => {});
  await openMemory(r.arg, alive);
  await list;
}

async function openMemory(id, alive) {
  const d = await api("GET", "/api/memories/" + encodeURIComponent(id));
  if (!alive()) return;
  const m = d.memory;
  state.current = m;
  $("detail-content").textContent = m.content;
  const validity = $("detail-validity");
  const closed = m.valid_to && Date.parse(m.valid_to) <= Date.now();
  validity.textContent = closed
    ? "No longer holds: held from " + when(m.valid_from) + " to " + when(m.valid_to) + "."
    : m.valid_from ? "Holds since " + when(m.valid_from) + (m.valid_to ? ", until " + when(m.valid_to) : "") + "." : "";
  validity.className = "validity" + (closed ? " closed" : "");
  const dl = $("fields");
  dl.replaceChildren();
  const fields = [["kind", "kind"], ["status", "status"], ["source", "source"], ["tags", "tags"],
                  ["trust_score", "trust"], ["flag_count", "flags"], ["importance", "importance"],
                  ["revision", "revision"], ["occurred_at", "happened"], ["created_at", "created"],
                  ["updated_at", "updated"], ["expires_at", "expires"], ["access_count", "read"],
                  ["archive_reason", "archived because"], ["session_id", "session"], ["id", "id"]];
  if (m.namespace && m.namespace.length) fields.splice(4, 0, ["namespace", "namespace"], ["key", "key"]);
  for (const [k, label] of fields) {
    let v = m[k];
    if (v === null || v === undefined || (Array.isArray(v) && !v.length && k !== "tags")) continue;
    if (k === "namespace") v = v.join(".");
    else if (Array.isArray(v)) v = v.join(", ");
    else if (/_at$/.test(k)) v = when(v);
    else if (typeof v === "number" && !Number.isInteger(v)) v = v.toFixed(2);
    dl.appendChild(el("dt", label));
    const dd = el("dd", null, "field-" + k);
    if (k === "session_id") dd.appendChild(link(hashFor("session", m.session_id), v));
    else dd.textContent = v;
    dl.appendChild(dd);
  }
  const ol = $("revisions");
  ol.replaceChildren();
  for (const rev of d.revisions) {
    const li = el("li", null, rev.is_current ? "current" : "");
    li.appendChild(el("span", "r" + rev.revision + (rev.is_current ? " (current)" : "") + ": " + rev.content));
    const meta = [when(rev.written_at), rev.reason, rev.changed_by].filter(Boolean).join(" · ");
    if (meta) li.appendChild(el("div", meta, "hint"));
    ol.appendChild(li);
  }
  const tb = $("audit");
  tb.replaceChildren();
  for (const a of d.audit) tb.appendChild(row([when(a.at), a.action, a.actor, a.token_label || ""]));
  const writable = m.source !== "resource" && m.status === "active";
  $("flag").disabled = !writable;
  $("forget").disabled = !writable;
  $("edit-toggle").disabled = !writable;
  $("reopen").hidden = !(writable && m.valid_to);
  $("edit-form").hidden = true;
  const panel = $("detail");
  showDetail(true);
  panel.scrollTop = 0;
  panel.scrollIntoView({ block: "nearest" });
}

function startEdit() {
  const m = state.current;
  if (!m) return;
  $("edit-content").value = m.content;
  $("edit-tags").value = (m.tags || []).join(", ");
  $("edit-reason").value = "";
  $("edit-form").hidden = false;
  $("edit-content").focus();
}

async function saveEdit(event) {
  event.preventDefault();
  const m = state.current;
  if (!m) return;
  const body = {};
  const content = $("edit-content").value;
  const tagList = splitList($("edit-tags").value);
  if (content !== m.content) body.content = content;
  if (tagList.join("\u0000") !== (m.tags || []).join("\u0000")) body.tags = tagList;
  if (!("content" in body) && !("tags" in body)) {
    $("edit-form").hidden = true;
    return;
  }
  if ($("edit-reason").value.trim()) body.reason = $("edit-reason").value.trim();
  try {
    const r = await api("PATCH", "/api/memories/" + encodeURIComponent(m.id), body);
    state.listKey = null;
    await refreshMemory(m.id);
    status("Saved as revision " + r.revision);
  } catch (e) {
    status("Could not save: " + e.message, true);
  }
}

// The detail and its list again, after a change (the address stays).
async function refreshMemory(id) {
  const seq = ++state.seq;
  const alive = () => seq === state.seq;
  const listHash = state.lastList || "#/memories";
  const params = new URLSearchParams(listHash.includes("?") ? listHash.slice(listHash.indexOf("?") + 1) : "");
  await Promise.all([openMemory(id, alive), showList(params, alive).catch(() => {})]);
}

async function forget() {
  const m = state.current;
  if (!m) return;
  try {
    await api("DELETE", "/api/memories/" + encodeURIComponent(m.id));
    state.listKey = null;
    state.current = null;
    state.flash = "Forgotten: " + m.content;
    location.hash = state.lastList || "#/memories";
  } catch (e) {
    status("Could not forget: " + e.message, true);
  }
}

async function flag() {
  const m = state.current;
  if (!m) return;
  try {
    const r = await api("POST", "/api/memories/" + encodeURIComponent(m.id) + "/flag", { reason: "flagged in the memory browser" });
    await refreshMemory(m.id);
    status("Flagged; trust is now " + Number(r.trust_score).toFixed(2));
  } catch (e) {
    status("Could not flag: " + e.message, true);
  }
}

async function reopen(id, content) {
  const r = await api("POST", "/api/memories/" + encodeURIComponent(id) + "/reopen", { reason: "undone in the memory browser" });
  state.listKey = null;
  status((r.reopened ? "Reopened: " : "Already valid: ") + content);
}

async function reopenCurrent() {
  const m = state.current;
  if (!m) return;
  try {
    await reopen(m.id, m.content);
    const text = $("status").textContent;
    await refreshMemory(m.id);
    status(text);
  } catch (e) {
    status("Could not reopen: " + e.message, true);
  }
}

// ---- entities ---------------------------------------------------------------

function entityHref(name) {
  return hashFor("entity", name);
}

async function renderEntities(r, alive) {
  const prefix = r.params.get("prefix") || "";
  $("entity-prefix").value = prefix;
  const list = await api("GET", "/api/entities" + (prefix ? "?prefix=" + encodeURIComponent(prefix) : ""));
  if (!alive()) return;
  const tb = $("entity-list");
  tb.replaceChildren();
  for (const e of list) {
    tb.appendChild(row([link(entityHref(e.name), e.name, "entity-link"), e.kind || "", e.memories, day(e.first_seen), day(e.last_seen)]));
  }
  if (!list.length) tb.appendChild(row(["No entities yet: they come from the names your memories mention."]));
}

function chip(name, kind, count) {
  const li = el("li");
  li.appendChild(link(entityHref(name), name, "entity-link"));
  if (kind) li.appendChild(el("span", kind, "source"));
  if (count !== undefined) li.appendChild(el("span", " " + count, "count"));
  return li;
}

async function renderEntity(r, alive) {
  const name = r.arg || "";
  const d = await api("GET", "/api/entities/" + encodeURIComponent(name));
  if (!alive()) return;
  $("entity-name").textContent = d.entity.name;
  $("entity-summary").textContent = (d.entity.kind || "unknown") + " · " + plural(d.entity.memories, "memory", "memories");
  const aliases = $("entity-aliases");
  aliases.replaceChildren();
  if (d.aliases && d.aliases.length) {
    aliases.appendChild(el("span", d.aliases.length > 1 ? "Written as (one entity): " : "Written as: ", "hint"));
    for (const a of d.aliases) aliases.appendChild(el("span", a.name + " ×" + a.memories, "alias"));
  }
  $("entity-memories").href = hashFor("memories", null, { entity: d.entity.name });
  const facts = $("entity-facts");
  facts.replaceChildren();
  for (const f of d.facts) {
    const li = el("li", null, "entity-fact");
    li.appendChild(link("#/memory/" + encodeURIComponent(f.id), f.content, "memory-link"));
    li.appendChild(el("span", " since " + when(f.valid_from), "source"));
    facts.appendChild(li);
  }
  if (!d.facts.length) facts.appendChild(el("li", "Nothing holds now.", "empty"));
  const history = $("entity-history");
  history.replaceChildren();
  for (const h of d.history) {
    const by = d.facts.find((f) => f.id === h.superseded_by);
    const text = h.content + " — held " + when(h.valid_from) + " to " + when(h.valid_to) +
      (by ? ", replaced by: " + by.content : "");
    const li = el("li", null, "entity-change");
    li.appendChild(link("#/memory/" + encodeURIComponent(h.id), text, "memory-link"));
    // A supersession named by mistake: valid again (engram.reopen).
    const undo = button("undo", "undo", async () => {
      try {
        await reopen(h.id, h.content);
        state.flash = $("status").textContent;
        await route();
      } catch (e) {
        status("Could not reopen: " + e.message, true);
      }
    });
    undo.title = "This still holds: make it valid again";
    li.appendChild(undo);
    history.appendChild(li);
  }
  const related = $("entity-related");
  related.replaceChildren();
  for (const x of d.related) related.appendChild(chip(x.name, x.kind, x.memories));
}

// ---- owners and stats ---------------------------------------------------------

function actFor(owner) {
  sessionStorage.setItem("engram.actAs", state.me && owner === state.me.owner ? "" : owner);
  state.listKey = null;
  showWho();
  location.hash = "#/memories";
}

const OWNERS_PAGE = 50;

async function renderOwners(r, alive) {
  const me = state.me;
  const platform = !!(me && me.platform);
  const prefix = r.params.get("prefix") || "";
  const after = r.params.get("after") || "";
  $("owner-form").hidden = !platform;
  $("owner-prefix").value = prefix;
  $("owners-note").textContent = platform
    ? "Every owner this database holds something for, with what each holds. A platform token acts for any of them."
    : "A user token acts only for its own owner; its figures are under Stats.";
  const tb = $("owner-list");
  const more = $("owners-more");
  more.replaceChildren();
  if (!platform) {
    if (!alive()) return;
    tb.replaceChildren(row([me ? me.owner || "local owner" : "", "", "", "", "", "", link("#/stats", "Stats")]));
    return;
  }
  // the token's own call, not the acted-for owner's
  const list = await api("GET", "/api/owners?" + new URLSearchParams({ prefix, after, limit: String(OWNERS_PAGE) }),
                         undefined, "");
  if (!alive()) return;
  tb.replaceChildren();
  const acting = actAs() || (me ? me.owner : "");
  for (const o of list) {
    const name = el("span", o.owner, "owner-name");
    const act = o.owner === acting
      ? el("span", "acting", "badge")
      : button("Act as", "act-as", () => actFor(o.owner));
    tb.appendChild(row([name, num(o.memories), num(o.events), num(o.workspaces), num(o.slots), bytes(o.image_bytes), act]));
  }
  if (!list.length) tb.appendChild(row([prefix ? "No owner's name starts with that." : "No owner holds anything yet."]));
  if (after) more.appendChild(link(hashFor("owners", null, { prefix }), "‹ First page", "pager"));
  if (list.length === OWNERS_PAGE) {
    more.appendChild(link(hashFor("owners", null, { prefix, after: list[list.length - 1].owner }), "Next ›", "pager"));
  }
}

function filterOwners(event) {
  event.preventDefault();
  location.hash = hashFor("owners", null, { prefix: $("owner-prefix").value.trim() });
}

function card(label, value, hint) {
  const c = el("div", null, "stat");
  c.appendChild(el("div", value, "value"));
  c.appendChild(el("div", label, "label"));
  if (hint) c.appendChild(el("div", hint, "hint"));
  return c;
}

async function renderStats(r, alive) {
  const s = await api("GET", "/api/stats");
  if (!alive()) return;
  $("stats-title").textContent = "Stats" + (s.owner ? " — " + s.owner : "");
  $("stats-subtitle").textContent = s.last_write_at ? "Last write " + when(s.last_write_at) + " (UTC)" : "Nothing written yet";
  const misses = s.misses || {};
  const events = s.events || {};
  const cards = $("stat-cards");
  cards.replaceChildren(
    card("memories", num(s.total), num((s.by_status || {}).active || 0) + " active"),
    card("new in 7 days", num(s.growth_7d)),
    card("searches that found nothing", num(misses.last_7d), "in 7 days; " + num(misses.total) + " in all"),
    card("flagged as wrong", num(s.flagged_active)),
    card("embedded", Math.round((s.embedded_share || 0) * 100) + "%", num(s.embedding_backlog) + " waiting"),
    card("sessions", num(events.sessions), plural(num(Object.values(events.by_type || {}).reduce((a, b) => a + b, 0)), "event")),
  );
  const writes = $("stat-writes");
  writes.replaceChildren();
  const top = Math.max(1, ...(s.writes_per_day || []).map((w) => w.writes));
  for (const w of s.writes_per_day || []) writes.appendChild(row([day(w.day), meter(w.writes, top), num(w.writes)]));
  const quotas = $("stat-quotas");
  quotas.replaceChildren();
  for (const [k, q] of Object.entries(s.quotas || {})) {
    const size = k === "image_bytes" ? bytes : num;
    const tr = row([k === "image_bytes" ? "images" : k, meter(q.used, q.limit, true), size(q.used || 0) + " / " + size(q.limit)]);
    tr.title = q.setting;
    tr.className = "quota-" + k;
    quotas.appendChild(tr);
  }
  const breakdown = $("stat-breakdown");
  breakdown.replaceChildren();
  for (const [title, obj] of [["kind", s.by_kind], ["status", s.by_status], ["source", s.by_source]]) {
    const head = row([title, ""]);
    head.className = "group";
    breakdown.appendChild(head);
    for (const [k, n] of Object.entries(obj || {})) breakdown.appendChild(row([k, num(n)]));
  }
  $("stat-misses-summary").textContent = misses.total
    ? "The latest searches that found nothing: what agents looked for and engram did not hold."
    : "Every search found something.";
  const ul = $("stat-misses");
  ul.replaceChildren();
  for (const m of misses.recent || []) {
    const li = el("li", null, "miss");
    li.appendChild(link(hashFor("memories", null, { q: m.query_text }), m.query_text));
    li.appendChild(el("span", " " + when(m.at), "source"));
    ul.appendChild(li);
  }
  const ev = $("stat-events");
  ev.replaceChildren();
  for (const [k, n] of Object.entries(events.by_type || {})) ev.appendChild(row([k.replace("_", " "), num(n)]));
  ev.appendChild(row(["tool calls (24 h)", num(events.tool_invocations_24h)]));
  ev.appendChild(row(["tool failures (24 h)", num(events.tool_failures_24h)]));
}

// ---- workspaces and sessions ------------------------------------------------------

async function renderWorkspaces(r, alive) {
  const d = await api("GET", "/api/workspaces?include_archived=true");
  if (!alive()) return;
  const tb = $("workspace-list");
  tb.replaceChildren();
  for (const w of d.workspaces) {
    const name = link(hashFor("workspace", w.name), w.name, "workspace-link");
    const cell = el("span");
    cell.appendChild(name);
    if (w.status !== "active") cell.appendChild(el("span", w.status, "badge"));
    tb.appendChild(row([cell, w.description, w.states, when(w.last_state_at), when(w.updated_at)]));
  }
  if (!d.workspaces.length) tb.appendChild(row(["No workspaces yet: agents create them to keep the state of their work."]));
}

function fieldList(dl, pairs) {
  dl.replaceChildren();
  for (const [label, v] of pairs) {
    if (v === null || v === undefined || v === "" || (Array.isArray(v) && !v.length)) continue;
    dl.appendChild(el("dt", label));
    dl.appendChild(el("dd", Array.isArray(v) ? v.join("\n") : typeof v === "object" ? JSON.stringify(v) : v));
  }
}

function sessionItem(x) {
  const li = el("li", null, "session");
  li.appendChild(link(hashFor("session", x.session_id), x.session_id, "session-link"));
  li.appendChild(el("span", " " + plural(x.events, "event") + ", last " + when(x.last_event_at), "source"));
  return li;
}

async function renderWorkspace(r, alive) {
  const name = r.arg || "";
  const [d, st] = await Promise.all([
    api("GET", "/api/workspaces/" + encodeURIComponent(name)),
    api("GET", "/api/workspaces/" + encodeURIComponent(name) + "/states?include_archived=true"),
  ]);
  if (!alive()) return;
  const w = d.workspace;
  $("workspace-name").textContent = w.name + (w.status !== "active" ? " (" + w.status + ")" : "");
  fieldList($("workspace-fields"), [["description", w.description], ["purpose", w.purpose], ["folder", w.root_folder],
    ["workflows", w.workflows], ["key files", w.key_files],
    ["preferences", w.preferences && Object.keys(w.preferences).length ? w.preferences : null],
    ["created", when(w.created_at)], ["updated", when(w.updated_at)]]);
  const states = $("workspace-states");
  states.replaceChildren();
  for (const s of st.states) {
    const box = el("details", null, "state");
    const sum = el("summary");
    sum.appendChild(el("strong", s.name));
    sum.appendChild(el("span", " " + when(s.created_at) + (s.archived ? " · archived" : ""), "source"));
    if (s.active_task) sum.appendChild(el("div", s.active_task, "task"));
    box.appendChild(sum);
    const dl = el("dl");
    box.appendChild(dl);
    box.addEventListener("toggle", async () => {
      if (!box.open || box.dataset.loaded) return;
      try {
        const full = await api("GET", "/api/workspaces/" + encodeURIComponent(name) + "/states/" + encodeURIComponent(s.name));
        box.dataset.loaded = "1";
        fieldList(dl, [["description", full.description], ["task", full.active_task],
          ["context", full.conversation_context], ["files", full.active_files], ["next steps", full.next_steps],
          ["tags", full.tags]]);
      } catch (e) {
        dl.replaceChildren(el("dd", e.message, "error"));
      }
    });
    states.appendChild(box);
  }
  if (!st.states.length) states.appendChild(el("p", "No saved states.", "empty"));
  const sessions = $("workspace-sessions");
  sessions.replaceChildren();
  for (const x of d.sessions) sessions.appendChild(sessionItem(x));
  const all = el("li");
  all.appendChild(link(hashFor("sessions", null, { workspace: w.name }), "all of this workspace's sessions"));
  sessions.appendChild(all);
  const slots = $("workspace-slots");
  slots.replaceChildren();
  for (const s of d.slots) {
    const li = el("li");
    li.appendChild(el("strong", s.label + ": "));
    li.appendChild(el("span", s.content));
    slots.appendChild(li);
  }
  if (!d.slots.length) slots.appendChild(el("li", "None.", "empty"));
}

async function renderSessions(r, alive) {
  const ws = r.params.get("workspace");
  const d = await api("GET", "/api/sessions?limit=100" + (ws ? "&workspace=" + encodeURIComponent(ws) : ""));
  if (!alive()) return;
  const tb = $("session-list");
  tb.replaceChildren();
  for (const x of d.sessions) {
    tb.appendChild(row([link(hashFor("session", x.session_id), x.session_id, "session-link"),
      x.workspace ? link(hashFor("workspace", x.workspace), x.workspace) : "",
      when(x.first_event_at), when(x.last_event_at), x.events, x.has_summary ? "yes" : ""]));
  }
  if (!d.sessions.length) tb.appendChild(row(["No sessions: agents capture the events of their conversations."]));
}

async function renderSession(r, alive) {
  const id = r.arg || "";
  const [d, all] = await Promise.all([
    api("GET", "/api/sessions/" + encodeURIComponent(id) + "/events?limit=500"),
    api("GET", "/api/sessions?limit=500").catch(() => ({ sessions: [] })),
  ]);
  if (!alive()) return;
  $("session-name").textContent = "Session " + id;
  const evs = d.events;
  const info = all.sessions.find((x) => x.session_id === id);
  const summary = $("session-summary");
  summary.replaceChildren(el("span", evs.length
    ? plural(evs.length, "event") + " from " + whenExactly(evs[0].created_at) + " to " + whenExactly(evs[evs.length - 1].created_at)
    : "No events in this session."));
  if (info && info.workspace) {
    summary.appendChild(el("span", " · workspace "));
    summary.appendChild(link(hashFor("workspace", info.workspace), info.workspace, "workspace-link"));
  }
  if (info && info.has_summary) summary.appendChild(el("span", " · summarized"));
  const ol = $("session-events");
  ol.replaceChildren();
  for (const e of evs) {
    const li = el("li", null, "event event-" + e.event_type + (e.success === false ? " failed" : ""));
    const head = el("div", null, "meta");
    head.appendChild(el("time", whenExactly(e.created_at)));
    head.appendChild(el("span", e.event_type.replace("_", " "), "kind"));
    if (e.tool_name) head.appendChild(el("span", e.tool_name, "tag"));
    if (e.success === false) head.appendChild(el("span", "failed", "badge"));
    head.appendChild(link("#/memory/" + encodeURIComponent(e.id), "open", "open"));
    li.appendChild(head);
    li.appendChild(el("div", e.content, "content"));
    ol.appendChild(li);
  }
}

// ---- resources ---------------------------------------------------------------

async function renderResources(r, alive) {
  const ul = $("resource-list");
  let list;
  try {
    list = await api("GET", "/api/resources");
  } catch (e) {
    if (!alive()) return;
    // not a platform token: resources are managed by platforms
    $("resource-form").hidden = true;
    ul.replaceChildren(el("li", e.message));
    return;
  }
  if (!alive()) return;
  ul.replaceChildren();
  for (const x of list) {
    const li = el("li", null, "resource");
    li.appendChild(el("strong", x.name));
    li.appendChild(el("span", " — " + x.content));
    tags(li, x.tags);
    li.appendChild(button("Delete", "danger", async () => {
      try {
        await api("DELETE", "/api/resources/" + encodeURIComponent(x.id));
        await route();
      } catch (e) {
        status("Could not delete: " + e.message, true);
      }
    }));
    ul.appendChild(li);
  }
  if (!list.length) ul.appendChild(el("li", "No resources yet.", "empty"));
  $("resource-form").hidden = false;
}

async function addResource(event) {
  event.preventDefault();
  try {
    await api("POST", "/api/resources", { name: $("resource-name").value, content: $("resource-content").value,
                                         tags: splitList($("resource-tags").value) });
    for (const id of ["resource-name", "resource-content", "resource-tags"]) $(id).value = "";
    state.flash = "Resource added";
    await route();
  } catch (e) {
    status("Could not add the resource: " + e.message, true);
  }
}

// ---- wiring -------------------------------------------------------------------

$("login-form").addEventListener("submit", login);
$("logout").addEventListener("click", logout);
$("search-form").addEventListener("submit", submitFilters);
$("entity-filter").addEventListener("submit", (e) => {
  e.preventDefault();
  location.hash = hashFor("entities", null, { prefix: $("entity-prefix").value.trim() });
});
$("owner-form").addEventListener("submit", filterOwners);
$("resource-form").addEventListener("submit", addResource);
$("edit-toggle").addEventListener("click", startEdit);
$("edit-cancel").addEventListener("click", () => { $("edit-form").hidden = true; });
$("edit-form").addEventListener("submit", saveEdit);
$("forget").addEventListener("click", forget);
$("flag").addEventListener("click", flag);
$("reopen").addEventListener("click", reopenCurrent);
for (const a of document.querySelectorAll(".pager a")) {
  a.addEventListener("click", (e) => { if (a.classList.contains("disabled")) e.preventDefault(); });
}
window.addEventListener("hashchange", route);

(async () => {
  if (!sessionStorage.getItem("engram.token")) {
    showApp(false);
    return;
  }
  try {
    await whoAmI();
  } catch (e) {
    sessionStorage.clear();
    showApp(false);
    $("login-error").textContent = "Log in again: " + e.message;
    return;
  }
  await route();
})();
