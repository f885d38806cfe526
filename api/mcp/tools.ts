/**
 * MCP tool definitions, derived from the operation registry: one tool per
 * operation, named exactly as the operation, its summary as description, its
 * full argument schema (path parameters and peer_id included) as inputSchema,
 * its result schema (where the registry has one) as outputSchema, and
 * annotations from its hints. Built once; the list a token sees is the
 * subset this build serves and its scopes allow, cached per distinct scope set.
 */
import type { Tool } from '@modelcontextprotocol/sdk/types.js';
import { operations } from '../registry/index.js';
import type { Operation } from '../registry/types.js';

/** The MCP tool for one operation. */
export function toolFor(op: Operation): Tool {
  return {
    name: op.name,
    description: op.summary,
    inputSchema: op.schema as Tool['inputSchema'],
    ...(op.result ? { outputSchema: op.result as Tool['outputSchema'] } : {}),
    annotations: {
      readOnlyHint: op.readOnly,
      // MCP's default for a write is destructive; only DEL operations are.
      destructiveHint: op.destructive,
      idempotentHint: op.idempotent,
      openWorldHint: false,
    },
  };
}

/** Operations MCP offers (not streams, not text answers). */
const allTools: ReadonlyArray<{ op: Operation; tool: Tool }> = operations.filter((op) => op.mcp).map((op) => ({ op, tool: toolFor(op) }));

/** Every tool, in registry order. */
export const ALL_TOOLS: readonly Tool[] = allTools.map((t) => t.tool);

/** True when a token holding `scopes` may call the operation (every scope it names). */
export const allowed = (op: Operation, scopes: readonly string[]): boolean => op.scopes.every((s) => scopes.includes(s));

/** Scope sets are few (one per token kind); the cache is bounded anyway. */
const CACHE_MAX = 256;

/**
 * The `tools/list` results: the tools of the registry's MCP operations whose
 * scopes the token holds. The same
 * (frozen-by-convention) object is returned for every token with the same
 * scope set.
 */
export class ToolLists {
  private readonly served: ReadonlyArray<{ op: Operation; tool: Tool }> = allTools;
  private readonly byScopeSet = new Map<string, { tools: Tool[] }>();

  forScopes(scopes: readonly string[]): { tools: Tool[] } {
    const key = [...scopes].sort().join(' ');
    let hit = this.byScopeSet.get(key);
    if (!hit) {
      hit = { tools: this.served.filter((t) => allowed(t.op, scopes)).map((t) => t.tool) };
      if (this.byScopeSet.size >= CACHE_MAX) this.byScopeSet.clear();
      this.byScopeSet.set(key, hit);
    }
    return hit;
  }
}
