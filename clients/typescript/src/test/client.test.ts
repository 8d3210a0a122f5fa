// The client and the AI SDK tools against engram-mcp (started by
// clients/python/tests/test_typescript.py, which sets ENGRAM_URL and a
// platform token in ENGRAM_TOKEN). The tools are executed by the real `ai`
// package's tool objects; no model is called.
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { test } from "node:test";
import { EngramClient, EngramError, engramTools, isConflict } from "../index.js";

const url = process.env.ENGRAM_URL!;
const platform = new EngramClient({ url, token: process.env.ENGRAM_TOKEN! });
const someone = () => `ts-${randomUUID().slice(0, 8)}`;
const options = { toolCallId: "call-1", messages: [], context: {} };

test("remember, a conflict and its resolution, search, revisions", async () => {
  const user = platform.asUser(someone());
  const first = await user.remember({ content: "Alice's standup is at 9:30 in room Kepler", tags: ["work"] });
  assert.ok(!isConflict(first) && first.status === "created");
  const conflict = await user.remember({ content: "Alice's standup is at 10:00 in room Kepler" });
  assert.ok(isConflict(conflict));
  assert.deepEqual(conflict.conflicts.map((c) => c.id), [first.id]);
  await assert.rejects(user.resolve(conflict, {}), TypeError);
  const second = await user.resolve(conflict, { supersede: [first.id] });
  const found = await user.search({ query: "when is the standup?", limit: 3 });
  assert.equal(found.results[0]?.id, second.id);
  assert.ok(!Number.isNaN(Date.parse(found.results[0]!.created_at!)));
  assert.equal((await user.update(second.id, { content: "Alice's standup is at 10:15 in room Kepler", reason: "moved" })).revision, 2);
  assert.deepEqual((await user.revisions(second.id)).map((r) => r.revision), [1, 2]);
  await user.remember({ content: "Bob drinks his coffee black" });
  const listed = [];
  for await (const m of user.list({ limit: 1 })) listed.push(m.id); // a page each: two pages
  assert.equal(listed.length, 2);
  assert.ok(listed.includes(second.id) && !listed.includes(first.id)); // the superseded one no longer holds
  assert.equal(await user.forget(first.id), true);
});

test("keyed items, namespaces, filters", async () => {
  const user = platform.asUser(someone());
  assert.equal((await user.put({ namespace: ["prefs", "ui"], key: "theme", value: { mode: "dark", n: 1 } })).status, "created");
  assert.equal((await user.put({ namespace: ["prefs", "ui"], key: "theme", value: { mode: "light", n: 3 } })).status, "revised");
  const item = await user.get(["prefs", "ui"], "theme");
  assert.deepEqual(item?.value, { mode: "light", n: 3 });
  assert.equal(await user.get(["prefs", "ui"], "nothing"), null);
  assert.deepEqual(await user.namespaces(), [["prefs", "ui"]]);
  const page = await user.listPage({ namespace_prefix: ["prefs"], filter: { n: { $gte: 2 } } });
  assert.deepEqual(page.memories.map((m) => m.key), ["theme"]);
  assert.equal(await user.delete(["prefs", "ui"], "theme"), true);
  await assert.rejects(user.put({ namespace: ["a.b"], key: "k", value: {} }), TypeError);
});

test("errors carry the SQLSTATE and hint; users stay apart", async () => {
  const name = someone();
  const token = await platform.createToken(name, { label: "laptop", expiresIn: 3600 });
  const own = new EngramClient({ url, token: token.token });
  await own.remember({ content: "Dana is allergic to peanuts" });
  await assert.rejects(own.search({ query: "allergies" }, { userId: "someone-else" }), (e: unknown) => e instanceof EngramError && e.status === 403);
  await assert.rejects(own.listPage({ filter: { n: { $regex: "x" } } }), (e: unknown) => e instanceof EngramError && e.status === 400 && typeof e.sqlstate === "string");
  assert.deepEqual((await platform.search({ query: "allergies" }, { userId: someone() })).results, []);
  await platform.revokeToken(token.id);
  await assert.rejects(own.search({ query: "x" }), (e: unknown) => e instanceof EngramError && e.status === 401);
  assert.equal((await platform.eraseUser(name)).memories, 1);
});

test("the AI SDK tools remember, search and tell about an entity", async () => {
  const name = someone();
  const tools = engramTools(platform, { userId: name });
  const stored = await tools.remember.execute!({ content: "Marta Keller leads the billing team in Lyon", tags: ["work"] }, options);
  assert.equal((stored as { stored: boolean }).stored, true);
  const found = await tools.search.execute!({ query: "who leads billing?" }, options);
  assert.ok(Array.isArray(found) && found[0]?.content.includes("Marta"));
  const conflict = await tools.remember.execute!({ content: "Marta Keller leads the billing team in Paris" }, options);
  assert.equal((conflict as { stored: boolean }).stored, false);
  const about = (await tools.about.execute!({ name: "Marta Keller" }, options)) as Record<string, unknown>;
  assert.ok(JSON.stringify(about).includes("billing"));
  // the tools' input schemas are what a model is shown
  assert.ok(tools.search.inputSchema);
  // another user's tools see nothing of it
  const other = await engramTools(platform, { userId: someone() }).search.execute!({ query: "who leads billing?" }, options);
  assert.deepEqual(other, []);
});

test("what is refused before anything is sent, and a conflict's user", async () => {
  assert.throws(() => platform.asUser(" bob"), TypeError);
  assert.throws(() => engramTools(platform, { userId: "" }), TypeError);
  await assert.rejects(platform.about(".."), TypeError);
  await assert.rejects(platform.eraseUser("."), TypeError);
  // a 404 that is not "nothing stored there" is an error, not null
  const wrongBase = new EngramClient({ url: url + "/nowhere", token: process.env.ENGRAM_TOKEN! });
  await assert.rejects(wrongBase.get(["a"], "k"), (e: unknown) => e instanceof EngramError && e.status === 404);
  // a conflict found for a bound user is resolved for that user
  const name = someone();
  const bound = platform.asUser(name);
  await bound.remember({ content: "Eve's desk is on floor 3" });
  const conflict = await bound.remember({ content: "Eve's desk is on floor 5" });
  assert.ok(isConflict(conflict) && conflict.userId === name);
  await platform.resolve(conflict, { force: true });
  assert.equal((await bound.listPage()).memories.length, 2);
  assert.equal((await platform.listPage()).memories.length, 0);
  // one found for the token's own owner is that token's, acting for nobody else
  const base = await platform.remember({ content: `The platform's backup for ${name} runs at 2:00` });
  const ownConflict = await platform.remember({ content: `The platform's backup for ${name} runs at 3:00` });
  assert.ok(!isConflict(base) && isConflict(ownConflict) && ownConflict.userId === undefined);
  await assert.rejects(bound.resolve(ownConflict, { force: true }), TypeError);
  const userToken = await platform.createToken(name, { label: "own" });
  await assert.rejects(new EngramClient({ url, token: userToken.token }).resolve(ownConflict, { force: true }), TypeError);
  const replaced = await platform.resolve(ownConflict, { supersede: ownConflict.conflicts.map((c) => c.id) });
  for (const id of [base.id, replaced.id]) await platform.forget(id, { hard: true });
  // a 409 that is not a conflict throws
  const first = (await bound.listPage()).memories[0]!;
  await bound.forget(first.id);
  await assert.rejects(bound.remember({ content: "Eve's desk is on floor 7", supersedes: [first.id] }), (e: unknown) => e instanceof EngramError && e.status === 409);
});
