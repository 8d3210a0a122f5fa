// The typed client of engram's /v1 API. Request and answer types come from
// the OpenAPI document (src/openapi.ts is generated from openapi.json by
// `npm run generate`), so they are written once, by the server.
import { createHash } from "node:crypto";
import type { components } from "./openapi.js";

type Schemas = components["schemas"];
/** A request body without `user_id`: the client sends the user in the query. */
type Body<T> = Omit<T, "user_id">;

export type Memory = Schemas["Memory"];
export type MemoryPage = Schemas["MemoryPage"];
export type SearchHit = Schemas["Hit"];
export type Found = Schemas["Found"];
export type Item = Schemas["Item"];
export type PutResult = Schemas["Put"];
export type Revision = Schemas["Revision"];
export type Entity = Schemas["Entity"];
export type Minted = Schemas["Minted"];
export type Embedded = Schemas["Embedded"];
export type Erased = Schemas["Erased"];
export type Problem = Schemas["Problem"];
export type RememberInput = Body<Schemas["RememberBody"]>;
export type SearchInput = Body<Schemas["SearchBody"]>;
export type UpdateInput = Body<Schemas["UpdateBody"]>;
export type PutInput = Body<Schemas["PutBody"]>;
export type ContextInput = Body<Schemas["ContextBody"]>;

/** A memory that conflicts with stored ones, as the server's 409 lists it. */
export interface ConflictingMemory {
  id: string;
  content: string;
  reasons: string[];
  similarity?: number | null;
}

/** What `remember` returns when the memory conflicts with stored ones: nothing
 * was written. Store it with `resolve(conflict, { supersede })` or `{ force: true }`. */
export interface Conflict {
  status: "conflict";
  conflicts: ConflictingMemory[];
  detail: string;
  hint?: string;
  input: RememberInput;
  userId?: string;
  /** A digest of the token it was found with: resolving it with another
   * token (and no user named) would store it for that token's owner. */
  foundBy: string;
}

export type Remembered = Schemas["Remembered"] | Conflict;

function digest(token: string | undefined): string {
  return createHash("sha256").update(token ?? "").digest("hex").slice(0, 16);
}

/** Whether `remember` found a conflict (and wrote nothing). */
export function isConflict(r: Remembered): r is Conflict {
  return r.status === "conflict" && "conflicts" in r;
}

/** Options every call takes: the user a platform token acts for. */
export interface As {
  userId?: string;
}

/** An error answer (RFC 9457 problem) with the database's SQLSTATE and hint;
 * status 0: no answer. */
export class EngramError extends Error {
  readonly status: number;
  readonly detail: string;
  readonly sqlstate: string | undefined;
  readonly hint: string | undefined;
  readonly problem: Record<string, unknown>;

  constructor(status: number, problem: Record<string, unknown>) {
    const detail = String(problem.detail ?? problem.error ?? "no detail given");
    const sqlstate = typeof problem.sqlstate === "string" ? problem.sqlstate : undefined;
    const hint = typeof problem.hint === "string" ? problem.hint : undefined;
    super(`${status} ${detail}${sqlstate ? ` (SQLSTATE ${sqlstate})` : ""}${hint ? ` hint: ${hint}` : ""}`);
    this.name = "EngramError";
    this.status = status;
    this.detail = detail;
    this.sqlstate = sqlstate;
    this.hint = hint;
    this.problem = problem;
  }
}

export interface EngramClientOptions {
  /** engram-mcp's base URL, e.g. http://localhost:8080 */
  url: string;
  token?: string;
  /** The user a platform token acts for when a call names none. */
  userId?: string;
  /** Per attempt, in milliseconds (default 30000). */
  timeoutMs?: number;
  /** Attempts after a 503 (default 3), waiting as Retry-After says. */
  maxRetries?: number;
  fetch?: typeof fetch;
}

type Query = Record<string, string | number | boolean | string[] | undefined | null>;

const RETRY = new Set([502, 503, 504]);
// SQLSTATEs of a 503 whose transaction was rolled back: nothing was written,
// so even a call that is not idempotent may be sent again
const ROLLED_BACK = new Set(["57014", "55P03", "40001", "40P01", "25006"]);
const IDEMPOTENT = new Set(["GET", "PUT", "DELETE"]);

/** A user id as given: not empty, no surrounding spaces (the server would
 * trim them, and " bob" would act as bob). */
const PADDED = /^[\s\u0085]|[\s\u0085]$/u; // the server trims Unicode White_Space, NEL among it

function checkedUser(userId: string | undefined): string | undefined {
  if (userId !== undefined && (typeof userId !== "string" || !userId.trim() || PADDED.test(userId))) {
    throw new TypeError(`userId ${JSON.stringify(userId)} must be a non-empty string without surrounding spaces`);
  }
  return userId;
}

/** A name as one path segment: "." and ".." would be read as the path's own
 * dots (URL parsers resolve them, encoded or not) and name another route. */
function segment(name: string, what: string): string {
  if (!name || name === "." || name === "..") throw new TypeError(`${what} ${JSON.stringify(name)} cannot be used: it is empty or a path's dot segment`);
  return encodeURIComponent(name);
}

function parsed(text: string): unknown {
  try {
    return text ? JSON.parse(text) : null;
  } catch {
    return { detail: text.slice(0, 500) };
  }
}

function labels(namespace: readonly string[], what: string): string {
  for (const label of namespace) {
    if (!label || label.includes(".") || /\p{Cc}/u.test(label)) {
      throw new TypeError(`${what} label ${JSON.stringify(label)} must be non-empty and hold no dot or control character`);
    }
  }
  return namespace.join(".");
}

export class EngramClient {
  readonly url: string;
  private readonly token: string | undefined;
  private readonly userId: string | undefined;
  private readonly timeoutMs: number;
  private readonly maxRetries: number;
  private readonly fetcher: typeof fetch;

  constructor(options: EngramClientOptions) {
    if (!/^https?:\/\//.test(options.url)) throw new TypeError(`url must be engram-mcp's base URL (http://host:8080), not ${options.url}`);
    this.url = options.url.replace(/\/+$/, "");
    this.token = options.token;
    this.userId = checkedUser(options.userId);
    this.timeoutMs = options.timeoutMs ?? 30_000;
    this.maxRetries = options.maxRetries ?? 3;
    this.fetcher = options.fetch ?? fetch;
  }

  /** The same settings, acting for `userId` (platform tokens). */
  asUser(userId: string): EngramClient {
    return new EngramClient({ url: this.url, ...(this.token ? { token: this.token } : {}), userId, timeoutMs: this.timeoutMs, maxRetries: this.maxRetries, fetch: this.fetcher });
  }

  /** The user a call acts for: the one it names, else the client's. */
  acting(as: As = {}): string | undefined {
    return checkedUser(as.userId) ?? this.userId;
  }

  private async call<T>(method: string, path: string, opts: { query?: Query; body?: unknown; as?: As; accept?: number[]; idempotent?: boolean; onGone?: T } = {}): Promise<{ status: number; data: T }> {
    const url = new URL(this.url + path);
    const query: Query = { ...opts.query, user_id: this.acting(opts.as) };
    const idempotent = opts.idempotent ?? IDEMPOTENT.has(method);
    for (const [k, v] of Object.entries(query)) {
      if (v === undefined || v === null) continue;
      for (const one of Array.isArray(v) ? v : [v]) url.searchParams.append(k, String(one));
    }
    const headers: Record<string, string> = { accept: "application/json" };
    if (this.token) headers.authorization = `Bearer ${this.token}`;
    if (opts.body !== undefined) headers["content-type"] = "application/json";
    let maybeApplied = false;
    for (let attempt = 0; ; attempt++) {
      let response: Response;
      try {
        response = await this.fetcher(url, {
          method,
          headers,
          ...(opts.body !== undefined ? { body: JSON.stringify(opts.body) } : {}),
          signal: AbortSignal.timeout(this.timeoutMs),
        });
      } catch (e) {
        throw new EngramError(0, { detail: `no answer from engram-mcp: ${String(e)}` });
      }
      const text = await response.text();
      const data = parsed(text) as Record<string, unknown> | null;
      if (RETRY.has(response.status) && attempt < this.maxRetries) {
        // a call that is not idempotent goes again only when it surely was
        // not applied: engram's 503 for a rolled-back transaction
        const sqlstate = typeof data?.sqlstate === "string" ? data.sqlstate : "";
        const rolledBack = response.status === 503 && (ROLLED_BACK.has(sqlstate) || sqlstate.startsWith("53"));
        if (idempotent || rolledBack) {
          maybeApplied ||= !rolledBack;
          const header = response.headers.get("retry-after");
          const told = header === null ? NaN : Number(header);
          const wait = Number.isFinite(told) && told >= 0 ? told * 1000 : 500 * 2 ** attempt;
          await new Promise((r) => setTimeout(r, Math.min(wait, 30_000)));
          continue;
        }
      }
      // a retry that finds nothing there: the earlier attempt did it, its answer was lost
      if (maybeApplied && response.status === 404 && opts.onGone !== undefined && data?.sqlstate === "P0002") return { status: 200, data: opts.onGone };
      if (response.ok || opts.accept?.includes(response.status)) return { status: response.status, data: data as T };
      throw new EngramError(response.status, data ?? {});
    }
  }

  // memories

  /** Store a memory; a conflict writes nothing and comes back as a `Conflict`. */
  async remember(input: RememberInput, as: As = {}): Promise<Remembered> {
    const { status, data } = await this.call<Schemas["Remembered"] & Record<string, unknown>>("POST", "/v1/memories", { body: input, as, accept: [409] });
    if (status !== 409) return data;
    const conflicts = Array.isArray(data.conflicts) ? (data.conflicts as ConflictingMemory[]) : [];
    // a 409 of another kind (a superseded memory that is archived, say)
    if (!conflicts.length) throw new EngramError(409, data);
    const userId = this.acting(as);
    const conflict: Conflict = {
      status: "conflict",
      conflicts,
      detail: String(data.detail ?? ""),
      ...(typeof data.hint === "string" ? { hint: data.hint } : {}),
      input,
      ...(userId !== undefined ? { userId } : {}),
      foundBy: digest(this.token),
    };
    return conflict;
  }

  /** Store a conflicting memory: replacing exactly `supersede`, or alongside (`force`). */
  async resolve(conflict: Conflict, how: { supersede?: string[]; force?: boolean }): Promise<Schemas["Remembered"]> {
    if (!how.supersede?.length && !how.force) throw new TypeError("resolve: name the memories it replaces (supersede) or store it alongside them (force: true)");
    if (conflict.userId === undefined && (this.userId !== undefined || conflict.foundBy !== digest(this.token))) {
      throw new TypeError("this conflict is the token owner's: resolve it with the client (token) that found it, acting for no other user");
    }
    const body: RememberInput = { ...conflict.input, ...(how.supersede?.length ? { supersedes: how.supersede } : {}), ...(how.force ? { force: true } : {}) };
    const { data } = await this.call<Schemas["Remembered"]>("POST", "/v1/memories", { body, as: conflict.userId !== undefined ? { userId: conflict.userId } : {} });
    return data;
  }

  async search(input: SearchInput, as: As = {}): Promise<Found> {
    return (await this.call<Found>("POST", "/v1/search", { body: input, as, idempotent: true })).data;
  }

  async recall(id: string, as: As = {}): Promise<Memory> {
    return (await this.call<Memory>("GET", `/v1/memories/${encodeURIComponent(id)}`, { as })).data;
  }

  /** One page; pass `next_cursor` as `cursor` for the next. */
  async listPage(query: { kinds?: string[]; tags?: string[]; status?: string; order_by?: string; descending?: boolean; limit?: number; cursor?: string; valid_at?: string; namespace_prefix?: string[]; filter?: Record<string, unknown>; refresh_ttl?: boolean } = {}, as: As = {}): Promise<MemoryPage> {
    const { namespace_prefix, filter, ...rest } = query;
    const q: Query = { ...rest, namespace_prefix: namespace_prefix ? labels(namespace_prefix, "namespace_prefix") : undefined, filter: filter ? JSON.stringify(filter) : undefined };
    return (await this.call<MemoryPage>("GET", "/v1/memories", { query: q, as })).data;
  }

  /** Every matching memory, a page at a time. */
  async *list(query: Omit<Parameters<EngramClient["listPage"]>[0] & object, "cursor"> = {}, as: As = {}): AsyncGenerator<Memory> {
    let cursor: string | undefined;
    do {
      const page = await this.listPage({ ...query, ...(cursor ? { cursor } : {}) }, as);
      yield* page.memories;
      cursor = page.next_cursor ?? undefined;
    } while (cursor);
  }

  async update(id: string, input: UpdateInput, as: As = {}): Promise<Schemas["Updated"]> {
    return (await this.call<Schemas["Updated"]>("PATCH", `/v1/memories/${encodeURIComponent(id)}`, { body: input, as })).data;
  }

  async forget(id: string, opts: { hard?: boolean; reason?: string } & As = {}): Promise<boolean> {
    const { userId, ...query } = opts;
    return (await this.call<Schemas["Forgotten"]>("DELETE", `/v1/memories/${encodeURIComponent(id)}`, { query, as: userId !== undefined ? { userId } : {}, onGone: { id, forgotten: true } })).data.forgotten;
  }

  async reopen(id: string, opts: { reason?: string } & As = {}): Promise<boolean> {
    const { userId, ...body } = opts;
    return (await this.call<Schemas["Reopened"]>("POST", `/v1/memories/${encodeURIComponent(id)}/reopen`, { body, as: userId !== undefined ? { userId } : {}, idempotent: true })).data.reopened;
  }

  async revisions(id: string, as: As = {}): Promise<Revision[]> {
    return (await this.call<Schemas["Revisions"]>("GET", `/v1/memories/${encodeURIComponent(id)}/revisions`, { as })).data.revisions;
  }

  // keyed memories

  async put(input: PutInput, as: As = {}): Promise<PutResult> {
    labels(input.namespace, "namespace");
    return (await this.call<PutResult>("PUT", "/v1/items", { body: input, as })).data;
  }

  /** The item, or null when nothing is stored there. */
  async get(namespace: string[], key: string, opts: { refreshTtl?: boolean } & As = {}): Promise<Item | null> {
    const { status, data } = await this.call<Item & Problem>("GET", "/v1/items", { query: { namespace: labels(namespace, "namespace"), key, refresh_ttl: opts.refreshTtl }, as: opts, accept: [404] });
    if (status !== 404) return data;
    // nothing stored there (P0002); any other 404 (a wrong base URL) is an error
    if (data?.sqlstate === "P0002") return null;
    throw new EngramError(404, (data ?? {}) as unknown as Record<string, unknown>);
  }

  async delete(namespace: string[], key: string, opts: { hard?: boolean } & As = {}): Promise<boolean> {
    return (await this.call<Schemas["Deleted"]>("DELETE", "/v1/items", { query: { namespace: labels(namespace, "namespace"), key, hard: opts.hard }, as: opts })).data.deleted;
  }

  async namespaces(opts: { prefix?: string[]; suffix?: string[]; maxDepth?: number; limit?: number; offset?: number } & As = {}): Promise<string[][]> {
    const query: Query = { prefix: opts.prefix ? labels(opts.prefix, "prefix") : undefined, suffix: opts.suffix ? labels(opts.suffix, "suffix") : undefined, max_depth: opts.maxDepth, limit: opts.limit, offset: opts.offset };
    return (await this.call<Schemas["Namespaces"]>("GET", "/v1/namespaces", { query, as: opts })).data.namespaces;
  }

  // context and entities

  async context(input: ContextInput = {}, as: As = {}): Promise<Record<string, unknown>> {
    return (await this.call<Record<string, unknown>>("POST", "/v1/context", { body: input, as, idempotent: true })).data;
  }

  async entities(opts: { prefix?: string; limit?: number } & As = {}): Promise<Entity[]> {
    return (await this.call<Schemas["Entities"]>("GET", "/v1/entities", { query: { prefix: opts.prefix, limit: opts.limit }, as: opts })).data.entities;
  }

  /** An entity's page: what holds now, what replaced what, related entities. */
  async about(name: string, opts: { limit?: number } & As = {}): Promise<Record<string, unknown>> {
    return (await this.call<Record<string, unknown>>("GET", `/v1/entities/${segment(name, "entity name")}`, { query: { limit: opts.limit }, as: opts })).data;
  }

  async embed(texts: string[], as: As = {}): Promise<Embedded> {
    return (await this.call<Embedded>("POST", "/v1/embed", { body: { texts }, as, idempotent: true })).data;
  }

  // tokens and users (platform tokens)

  async createToken(userId: string, opts: { label: string; expiresIn?: number }): Promise<Minted> {
    const body: Schemas["TokenBody"] = { user_id: checkedUser(userId) ?? "", label: opts.label, ...(opts.expiresIn !== undefined ? { expires_in: opts.expiresIn } : {}) };
    return (await this.call<Minted>("POST", "/v1/tokens", { body })).data;
  }

  async revokeToken(id: string): Promise<void> {
    await this.call<null>("DELETE", `/v1/tokens/${encodeURIComponent(id)}`, { onGone: null });
  }

  async eraseUser(userId: string): Promise<Erased> {
    return (await this.call<Erased>("DELETE", `/v1/users/${segment(checkedUser(userId) ?? "", "userId")}/memories`)).data;
  }
}
