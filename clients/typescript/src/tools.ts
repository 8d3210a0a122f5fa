// Memory tools for the Vercel AI SDK: remember, search and about, bound to
// one user, for `generateText({ tools: engramTools(client, { userId }) })`.
import { tool } from "ai";
import { z } from "zod";
import { isConflict, type EngramClient } from "./client.js";

export interface EngramToolsOptions {
  /** The user the tools act for (a platform token); leave out for a user token's own user. */
  userId?: string;
}

export function engramTools(client: EngramClient, options: EngramToolsOptions = {}) {
  if (options.userId !== undefined && (!options.userId.trim() || /^[\s\u0085]|[\s\u0085]$/u.test(options.userId))) {
    // an empty id would quietly act for the token's own owner, shared by every such caller
    throw new TypeError(`engramTools: userId ${JSON.stringify(options.userId)} must be a non-empty string without surrounding spaces`);
  }
  const as = options.userId !== undefined ? { userId: options.userId } : {};
  return {
    remember: tool({
      description: "Remember a durable fact, event or preference about the user for later conversations. One fact per call, in plain language.",
      inputSchema: z.object({
        content: z.string().min(1).describe("The fact, in one sentence"),
        tags: z.array(z.string()).optional().describe("Topics, e.g. ['travel']"),
      }),
      execute: async ({ content, tags }) => {
        const stored = await client.remember({ content, ...(tags ? { tags } : {}) }, as);
        if (isConflict(stored)) {
          return { stored: false, conflicts: stored.conflicts.map((c) => ({ id: c.id, content: c.content })), note: "It contradicts what is stored; ask the user which holds before replacing it." };
        }
        return { stored: true, id: stored.id, duplicate: stored.status === "duplicate" };
      },
    }),
    search: tool({
      description: "Search what is remembered about the user, by meaning and words. Use before answering questions about the user's preferences, plans or past.",
      inputSchema: z.object({
        query: z.string().min(1).describe("What to look for"),
        limit: z.number().int().min(1).max(20).optional(),
      }),
      execute: async ({ query, limit }) => {
        const found = await client.search({ query, limit: limit ?? 5, min_similarity: 0.2 }, as);
        return found.results.map((h) => ({ id: h.id, content: h.content, score: Math.round(h.score * 1000) / 1000, created_at: h.created_at }));
      },
    }),
    about: tool({
      description: "What is known about a person, project, place or thing the user mentioned: what holds now and what changed.",
      inputSchema: z.object({ name: z.string().min(1).describe("The entity's name, e.g. 'Marta'") }),
      execute: async ({ name }) => client.about(name, as),
    }),
  };
}
