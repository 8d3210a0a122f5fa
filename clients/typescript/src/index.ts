export { EngramClient, EngramError, isConflict } from "./client.js";
export type {
  As,
  Conflict,
  ConflictingMemory,
  ContextInput,
  EngramClientOptions,
  Embedded,
  Entity,
  Found,
  Item,
  Memory,
  MemoryPage,
  Minted,
  Problem,
  PutInput,
  PutResult,
  RememberInput,
  Remembered,
  Revision,
  SearchHit,
  SearchInput,
  UpdateInput,
} from "./client.js";
export { engramTools } from "./tools.js";
export type { EngramToolsOptions } from "./tools.js";
export type { components, paths } from "./openapi.js";
