import { z } from 'zod';
import type { JsonRpcResponse } from '@sqlenv/protocol';

/** JSON-RPC 2.0 error codes used here (https://www.jsonrpc.org/specification#error_object). */
export const JsonRpcErrorCode = { INVALID_REQUEST: -32600, INTERNAL_ERROR: -32603 } as const;

const JsonRpcRequestSchema = z.looseObject({
  jsonrpc: z.literal('2.0'),
  method: z.string().min(1),
  id: z.union([z.string(), z.number(), z.null()]).optional(),
  params: z.unknown().optional(),
});

/**
 * Reply to an `mcp` frame. This environment exposes its tools as actions, not
 * MCP tools, so every well-formed request gets what a stock OpenEnv server
 * without MCP answers: JSON-RPC error -32603 "Environment does not support MCP".
 */
export function mcpReply(request: Record<string, unknown>): JsonRpcResponse {
  const parsed = JsonRpcRequestSchema.safeParse(request);
  const rawId = request['id'];
  const id = typeof rawId === 'string' || typeof rawId === 'number' ? rawId : null;
  if (!parsed.success) {
    return { jsonrpc: '2.0', id, error: { code: JsonRpcErrorCode.INVALID_REQUEST, message: `Invalid request: ${parsed.error.issues[0]?.message ?? 'malformed'}` } };
  }
  return { jsonrpc: '2.0', id, error: { code: JsonRpcErrorCode.INTERNAL_ERROR, message: 'Environment does not support MCP' } };
}
