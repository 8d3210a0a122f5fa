// engram's memory browser. Talks to /api with the token the person entered
// (sessionStorage: this tab only). Stored text is untrusted: it is only ever
// set with textContent, never parsed as HTML.
"use strict";

const $ = (id) => document.getElementById(id);
let current = null; // the memory shown in the detail panel

function auth() {
  const h = { Authorization: "Bearer " + sessionStorage.getItem("engram.token"), "Content-Type": "application/json" };
  const actAs = sessionStorage.getItem("engram.actAs");
  if (actAs) h["X-User-Id"] = actAs;
  return h;
}

async function api(method, path, body) {
  const r = await fetch(path, { method, headers: auth(), body: body ? JSON.stringify(body) : undefined });
  if (r.status === 204) return null;
  const data = await r.json().catch(() => ({}));
  if (!r.ok) throw new Error(data.error || r.statusText);
  return data;
}

function el(tag, text, cls) {
  const e = document.createElement(tag);
  if (text !== undefined && text !== null) e.textContent = String(text);
  if (cls) e.className = cls;
  return e;
}

function status(text, isError) {
  $("status").textContent = text;
  $("status").className = isError ? "error" : "";
}

function showApp(on) {
  $("login").hidden = on;
  $("app").hidden = !on;
  $("logout").hidden = !on;
}

async function login(event) {
  event.preventDefault();
  sessionStorage.setItem("engram.token", $("token").value.trim());
  sessionStorage.setItem("engram.actAs", $("act-as").value.trim());
  try {
    await api("GET", "/api/memories?limit=1");
  } catch (e) {
    sessionStorage.clear();
    $("login-error").textContent = "Login failed: " + e.message;
    return;
  }
  $("login-error").textContent = "";
  $("token").value = "";
  await start();
}

async function start() {
  showApp(true);
  $("who").textContent = sessionStorage.getItem("engram.actAs") ? "acting as " + sessionStorage.getItem("engram.actAs") : "";
  await search();
  await loadEntities();
  await loadResources();
}

// A timestamp as its date and minute, in UTC ("2026-05-06 15:00").
function when(t) {
  return t ? String(t).replace("T", " ").slice(0, 16) : "";
}

// The hits of a search by when they happened, oldest first.
function timeline(hits) {
  const ol = $("timeline");
  ol.replaceChildren();
  const dated = hits.filter((h) => h.occurred_at).sort((a, b) => String(a.occurred_at).localeCompare(String(b.occurred_at)));
  for (const h of dated) {
    const li = el("li", null, "timeline-item");
    li.appendChild(el("time", when(h.occurred_at)));
    li.appendChild(el("span", " " + h.content));
    ol.appendChild(li);
  }
}

function entityLink(name, kind, count) {
  const li = el("li");
  const a = el("a", name, "entity-link");
  a.dataset.name = name;
  a.addEventListener("click", () => openEntity(name));
  li.appendChild(a);
  if (kind) li.appendChild(el("span", kind, "source"));
  if (count !== undefined) li.appendChild(el("span", " " + count + (count === 1 ? " memory" : " memories")));
  return li;
}

async function loadEntities() {
  const ul = $("entity-list");
  ul.replaceChildren();
  try {
    for (const e of await api("GET", "/api/entities")) ul.appendChild(entityLink(e.name, e.kind, e.memories));
  } catch (e) {
    ul.appendChild(el("li", "Could not list entities: " + e.message));
  }
}

async function openEntity(name) {
  try {
    const d = await api("GET", "/api/entities/" + encodeURIComponent(name));
    $("entity-name").textContent = d.entity.name;
    $("entity-summary").textContent = (d.entity.kind || "unknown") + " · " + d.entity.memories +
      (d.entity.memories === 1 ? " memory" : " memories");
    const facts = $("entity-facts");
    facts.replaceChildren();
    for (const f of d.facts) {
      const li = el("li", null, "entity-fact");
      li.appendChild(el("span", f.content));
      li.appendChild(el("span", " since " + when(f.valid_from), "source"));
      facts.appendChild(li);
    }
    const history = $("entity-history");
    history.replaceChildren();
    for (const h of d.history) {
      const by = d.facts.find((f) => f.id === h.superseded_by);
      const text = h.content + " — held " + when(h.valid_from) + " to " + when(h.valid_to) +
        (by ? ", replaced by: " + by.content : "");
      const li = el("li", null, "entity-change");
      li.appendChild(el("span", text));
      // A supersession named by mistake: valid again (engram.reopen).
      const undo = el("button", "undo", "undo");
      undo.type = "button";
      undo.title = "This still holds: make it valid again";
      undo.addEventListener("click", async () => {
        try {
          await api("POST", "/api/memories/" + h.id + "/reopen", { reason: "undone in the memory browser" });
          status("Reopened: " + h.content);
          await openEntity(name);
        } catch (e) {
          status("Could not reopen: " + e.message, true);
        }
      });
      li.appendChild(undo);
      history.appendChild(li);
    }
    const related = $("entity-related");
    related.replaceChildren();
    for (const r of d.related) related.appendChild(entityLink(r.name, r.kind, r.memories));
    $("entity").hidden = false;
  } catch (e) {
    status("Could not open the entity: " + e.message, true);
  }
}

function tags(li, list) {
  for (const t of list || []) li.appendChild(el("span", t, "tag"));
}

async function search(event) {
  if (event) event.preventDefault();
  const q = $("query").value.trim();
  try {
    const hits = await api("GET", "/api/memories?limit=20" + (q ? "&q=" + encodeURIComponent(q) : ""));
    const ul = $("results");
    ul.replaceChildren();
    for (const h of hits) {
      const li = el("li");
      const a = el("a", h.content);
      a.dataset.id = h.id;
      a.className = "memory-link";
      a.addEventListener("click", () => openMemory(h.id));
      li.appendChild(a);
      if (h.source && h.source !== "memory") li.appendChild(el("span", h.source, "source"));
      tags(li, h.tags);
      ul.appendChild(li);
    }
    timeline(hits);
    status(hits.length + (hits.length === 1 ? " memory" : " memories"));
  } catch (e) {
    status("Search failed: " + e.message, true);
  }
}

async function openMemory(id) {
  try {
    const d = await api("GET", "/api/memories/" + encodeURIComponent(id));
    current = d.memory;
    const dl = $("fields");
    dl.replaceChildren();
    for (const [k, label] of [["content", "content"], ["kind", "kind"], ["source", "source"], ["status", "status"],
                              ["tags", "tags"], ["trust_score", "trust"], ["flag_count", "flags"],
                              ["revision", "revision"], ["created_at", "created"], ["updated_at", "updated"]]) {
      dl.appendChild(el("dt", label));
      const v = current[k];
      dl.appendChild(el("dd", Array.isArray(v) ? v.join(", ") : v, "field-" + k));
    }
    const ol = $("revisions");
    ol.replaceChildren();
    for (const r of d.revisions) ol.appendChild(el("li", "r" + r.revision + (r.is_current ? " (current)" : "") + ": " + r.content));
    const tb = $("audit");
    tb.replaceChildren();
    for (const a of d.audit) {
      const tr = el("tr");
      for (const v of [a.at, a.action, a.actor, a.token_label || ""]) tr.appendChild(el("td", v));
      tb.appendChild(tr);
    }
    const readOnly = current.source === "resource" || current.status !== "active";
    $("flag").disabled = readOnly;
    $("forget").disabled = readOnly;
    $("detail").hidden = false;
  } catch (e) {
    status("Could not open the memory: " + e.message, true);
  }
}

async function forget() {
  if (!current) return;
  try {
    await api("DELETE", "/api/memories/" + encodeURIComponent(current.id));
    const gone = current.content;
    $("detail").hidden = true;
    current = null;
    await search();
    status("Forgotten: " + gone);
  } catch (e) {
    status("Could not forget: " + e.message, true);
  }
}

async function flag() {
  if (!current) return;
  try {
    const r = await api("POST", "/api/memories/" + encodeURIComponent(current.id) + "/flag", { reason: "flagged in the memory browser" });
    status("Flagged; trust is now " + r.trust_score);
    await openMemory(current.id);
  } catch (e) {
    status("Could not flag: " + e.message, true);
  }
}

async function loadResources() {
  const ul = $("resource-list");
  ul.replaceChildren();
  try {
    const list = await api("GET", "/api/resources");
    for (const r of list) {
      const li = el("li");
      li.appendChild(el("strong", r.name));
      li.appendChild(el("span", " — " + r.content));
      tags(li, r.tags);
      const del = el("button", "Delete", "danger");
      del.addEventListener("click", async () => {
        try {
          await api("DELETE", "/api/resources/" + encodeURIComponent(r.id));
          await loadResources();
        } catch (e) {
          status("Could not delete: " + e.message, true);
        }
      });
      li.appendChild(del);
      ul.appendChild(li);
    }
    $("resource-form").hidden = false;
  } catch (e) {
    // not a platform token: resources are read-only here
    $("resource-form").hidden = true;
    ul.appendChild(el("li", e.message));
  }
}

async function addResource(event) {
  event.preventDefault();
  const tagList = $("resource-tags").value.split(",").map((t) => t.trim()).filter(Boolean);
  try {
    await api("POST", "/api/resources", { name: $("resource-name").value, content: $("resource-content").value, tags: tagList });
    for (const id of ["resource-name", "resource-content", "resource-tags"]) $(id).value = "";
    status("Resource added");
    await loadResources();
  } catch (e) {
    status("Could not add the resource: " + e.message, true);
  }
}

$("login-form").addEventListener("submit", login);
$("search-form").addEventListener("submit", search);
$("resource-form").addEventListener("submit", addResource);
$("forget").addEventListener("click", forget);
$("flag").addEventListener("click", flag);
$("logout").addEventListener("click", () => { sessionStorage.clear(); showApp(false); });
if (sessionStorage.getItem("engram.token")) start(); else showApp(false);
