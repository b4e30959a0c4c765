import { AppError, ErrorCode, formatZodIssues } from '@sqlenv/shared';
import { errorMessage } from './adapter-manager.ts';
import { ServerUnreachableError } from './http-call.ts';
import type { InferencePool, InferenceServer } from './inference-pool.ts';
import { ModelListSchema, type ModelList } from '@sqlenv/protocol';

export interface ServedBaseModel {
  /** The model name requests for the base model carry. */
  name: string;
  /** Context length the servers accept (the smallest listed), if they say. */
  maxModelLen: number | null;
}

/**
 * The start-up check of a remote source: every server answers GET /v1/models
 * with this process's key and serves the base model (`wanted`, else the one
 * root model they list). A server down, a refused key, a model not served:
 * AppError naming the server, before any episode starts.
 */
export async function checkInferenceServers(pool: InferencePool, wanted?: string): Promise<ServedBaseModel> {
  const lists = await Promise.all(pool.servers.map(async (server) => ({ server, list: await modelList(pool, server) })));
  const name = wanted ?? rootModel(lists);
  let maxModelLen: number | null = null;
  for (const { server, list } of lists) {
    const card = list.data.find((m) => m.id === name);
    if (card === undefined) throw new AppError(ErrorCode.NOT_FOUND, `${server.url} does not serve the model ${name} (it serves: ${list.data.map((m) => m.id).join(', ') || 'nothing'})`);
    const len = card.max_model_len ?? null;
    if (len !== null) maxModelLen = maxModelLen === null ? len : Math.min(maxModelLen, len);
  }
  return { name, maxModelLen };
}

async function modelList(pool: InferencePool, server: InferenceServer): Promise<ModelList> {
  let reply;
  try {
    reply = await pool.call(server, 'GET', '/v1/models');
  } catch (error) {
    if (error instanceof ServerUnreachableError) throw new AppError(ErrorCode.TRANSPORT, `inference server ${server.url} does not answer: ${error.message}`, { cause: error });
    throw error;
  }
  if (reply.status === 401 || reply.status === 403) throw new AppError(ErrorCode.UNAUTHORIZED, `inference server ${server.url} refused the API key (HTTP ${reply.status}): check --inference-api-key (SQLENV_INFERENCE_API_KEY)`);
  if (reply.status !== 200) throw new AppError(ErrorCode.TRANSPORT, `inference server ${server.url}: GET /v1/models answered HTTP ${reply.status}: ${errorMessage(reply)}`);
  let json: unknown;
  try {
    json = JSON.parse(reply.text);
  } catch {
    throw new AppError(ErrorCode.VALIDATION, `inference server ${server.url}: GET /v1/models did not answer JSON`);
  }
  const parsed = ModelListSchema.safeParse(json);
  if (!parsed.success) throw new AppError(ErrorCode.VALIDATION, `inference server ${server.url}: GET /v1/models is not a model list: ${formatZodIssues(parsed.error)}`);
  return parsed.data;
}

/** The one base model (parent null) every server lists; several, or servers that disagree: ask for --inference-model. */
function rootModel(lists: ReadonlyArray<{ server: InferenceServer; list: ModelList }>): string {
  const roots = new Set<string>();
  for (const { list } of lists) for (const m of list.data) if ((m.parent ?? null) === null) roots.add(m.id);
  const [only, ...others] = [...roots];
  if (only === undefined) throw new AppError(ErrorCode.NOT_FOUND, `no inference server lists a base model (parent null) in GET /v1/models: name it with --inference-model`);
  if (others.length > 0) throw new AppError(ErrorCode.VALIDATION, `the inference servers list several base models (${[...roots].join(', ')}): choose one with --inference-model`);
  return only;
}
