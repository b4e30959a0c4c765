import { z } from 'zod';
import { AppError, ErrorCode, toAppError, type Logger } from '@sqlenv/shared';
import { HttpResetRequestSchema, HttpStepRequestSchema, openEnvSchemas, type ValidationIssue } from '@sqlenv/protocol';
import type { EnvActions } from './env-actions.ts';
import type { ServedRuntime } from './env-runtime.ts';
import type { EnvSession } from './env-session.ts';
import { httpErrorBody, httpStatusOf, toValidationIssues, validationError } from './error-mapping.ts';
import { readJsonBody, sendJson, type RequestContext, type Router } from './router.ts';
import type { ServerMetrics } from './server-metrics.ts';
import type { SessionRegistry } from './session-registry.ts';

export const SESSION_HEADER = 'x-session-id';

/** OpenEnv's EnvironmentMetadata, served at /metadata. */
export const ServerMetadataSchema = z.strictObject({
  name: z.string(),
  description: z.string(),
  readme_content: z.string().nullable(),
  version: z.string().nullable(),
  author: z.string().nullable(),
  documentation_url: z.string().nullable(),
});
export type ServerMetadata = z.infer<typeof ServerMetadataSchema>;

export interface HttpRouteDeps {
  registry: SessionRegistry;
  actions: EnvActions;
  runtime: ServedRuntime;
  metrics: ServerMetrics;
  metadata: ServerMetadata;
  maxBodyBytes: number;
  logger: Logger;
}

/**
 * OpenEnv's HTTP routes. `/reset` and `/step` keep OpenEnv's shapes; on top,
 * `/reset` opens an HTTP session whose id (`session_id` in the body and the
 * X-Session-Id header) lets `/step` and `/state` continue the same episode —
 * a multi-step episode with curl. Without a session id, `/step` and `/state`
 * are stateless, as in stock OpenEnv.
 */
export function registerHttpRoutes(router: Router, deps: HttpRouteDeps): void {
  const schemas = openEnvSchemas();
  router
    .add('GET', '/health', ({ res }) => sendJson(res, 200, { status: 'healthy' }))
    .add('GET', '/metadata', ({ res }) => sendJson(res, 200, deps.metadata))
    .add('GET', '/schema', ({ res }) => sendJson(res, 200, schemas))
    .add('GET', '/metrics', async ({ res }) => {
      const { contentType, body } = await deps.metrics.render();
      res.writeHead(200, { 'content-type': contentType });
      res.end(body);
    })
    .add('POST', '/reset', (ctx) => guarded(ctx, deps, () => reset(ctx, deps)))
    .add('POST', '/step', (ctx) => guarded(ctx, deps, () => step(ctx, deps)))
    .add('GET', '/state', (ctx) => guarded(ctx, deps, () => state(ctx, deps)))
    .add('POST', '/close', (ctx) => guarded(ctx, deps, () => closeSession(ctx, deps)));
}

/** Translate any failure of a route into FastAPI-style `{"detail": ...}` with the right status. */
async function guarded(ctx: RequestContext, deps: HttpRouteDeps, handler: () => Promise<void>): Promise<void> {
  try {
    await handler();
  } catch (error) {
    const appError = toAppError(error);
    const status = httpStatusOf(appError);
    deps.metrics.errorsTotal.inc({ code: `HTTP_${status}` });
    if (status >= 500) deps.logger.error({ err: appError, path: ctx.url.pathname }, 'http request failed');
    sendJson(ctx.res, status, httpErrorBody(appError));
  }
}

async function readObjectBody(ctx: RequestContext, deps: HttpRouteDeps, required: boolean): Promise<Record<string, unknown>> {
  const body = await readJsonBody(ctx.req, deps.maxBodyBytes);
  if (!body.ok) {
    if (body.status === 413) throw new AppError(ErrorCode.VALIDATION, String(body.detail), { details: { httpStatus: 413 } });
    throw validationError('Invalid JSON body', body.detail as ValidationIssue[]);
  }
  if (body.value === undefined) {
    if (required) throw validationError('Missing body', [{ loc: ['body'], msg: 'Field required', type: 'missing' }]);
    return {};
  }
  if (typeof body.value !== 'object' || body.value === null || Array.isArray(body.value)) {
    throw validationError('Body must be a JSON object', [{ loc: ['body'], msg: 'Input should be a valid dictionary', type: 'dict_type' }]);
  }
  return body.value as Record<string, unknown>;
}

/**
 * Session id from the body field, the X-Session-Id header or `?session_id=`.
 * Any of them may carry it; when several do they must agree: a body that names
 * one session and a header that names another is a client bug, not a choice
 * for the server to make (400).
 */
function sessionIdOf(ctx: RequestContext, bodyId: string | undefined): string | undefined {
  const header = ctx.req.headers[SESSION_HEADER];
  const candidates: Array<[string, string | undefined]> = [
    ['body session_id', bodyId],
    ['X-Session-Id header', typeof header === 'string' && header !== '' ? header : undefined],
    ['session_id query parameter', ctx.url.searchParams.get('session_id') ?? undefined],
  ];
  const given = candidates.filter((c): c is [string, string] => c[1] !== undefined);
  const first = given[0];
  const conflict = given.find(([, id]) => id !== first?.[1]);
  if (first !== undefined && conflict !== undefined) {
    throw new AppError(ErrorCode.VALIDATION, `Conflicting session ids: ${first[0]} '${first[1]}' but ${conflict[0]} '${conflict[1]}'; send one, or the same in both`, {
      details: { httpStatus: 400 },
    });
  }
  return first?.[1];
}

function httpSession(deps: HttpRouteDeps, id: string): EnvSession {
  const session = deps.registry.get(id);
  if (session === undefined || session.kind !== 'http') {
    throw new AppError(ErrorCode.NOT_FOUND, `Unknown or expired session_id '${id}': call POST /reset to start a new session`);
  }
  return session;
}

async function reset(ctx: RequestContext, deps: HttpRouteDeps): Promise<void> {
  const raw = await readObjectBody(ctx, deps, false);
  const parsed = HttpResetRequestSchema.safeParse(raw);
  if (!parsed.success) throw validationError('Invalid reset request', toValidationIssues(parsed.error, ['body']));
  const { session_id: bodyId, ...options } = parsed.data;
  const id = sessionIdOf(ctx, bodyId);
  // Bad input is a 422 even on a full server: check it before taking a session slot.
  deps.actions.parseResetOptions(options, ['body']);
  let session: EnvSession;
  let opened = false;
  if (id !== undefined) {
    session = httpSession(deps, id);
  } else {
    session = deps.registry.open('http', () => undefined);
    opened = true;
  }
  try {
    const result = await session.enqueue(() => deps.actions.reset(session.envForReset(), options, 'http', ['body']));
    sendJson(ctx.res, 200, { ...result, session_id: session.id }, { [SESSION_HEADER]: session.id });
  } catch (error) {
    // A session opened for a reset that failed (unknown question...) would only hold a slot.
    if (opened) deps.registry.remove(session.id);
    throw error;
  }
}

async function step(ctx: RequestContext, deps: HttpRouteDeps): Promise<void> {
  const raw = await readObjectBody(ctx, deps, true);
  const parsed = HttpStepRequestSchema.safeParse(raw);
  if (!parsed.success) throw validationError('Invalid step request', stepRequestIssues(parsed.error));
  const id = sessionIdOf(ctx, parsed.data.session_id);
  // Validate before touching any environment: a bad action is a 422 whatever the session.
  deps.actions.parseAction(parsed.data.action, ['body', 'action']);
  if (id === undefined) {
    // Stock OpenEnv semantics: a fresh environment for this one call.
    const env = deps.runtime.createEnvironment();
    try {
      sendJson(ctx.res, 200, await deps.actions.step(env, parsed.data.action, 'http', ['body', 'action'], deps.logger));
    } finally {
      env.close();
    }
    return;
  }
  const session = httpSession(deps, id);
  const log = deps.logger.child({ sessionId: session.id });
  const result = await session.enqueue(() => deps.actions.step(session.envForStep(), parsed.data.action, 'http', ['body', 'action'], log));
  sendJson(ctx.res, 200, { ...result, session_id: session.id }, { [SESSION_HEADER]: session.id });
}

const STEP_KEYS = Object.keys(HttpStepRequestSchema.shape).join(', ');

/** Validation issues of a /step body; an unknown key's message lists the accepted ones. */
function stepRequestIssues(error: z.ZodError): ValidationIssue[] {
  return toValidationIssues(error, ['body']).map((issue) => (issue.type === 'unrecognized_keys' ? { ...issue, msg: `${issue.msg}; /step accepts ${STEP_KEYS}` } : issue));
}

async function state(ctx: RequestContext, deps: HttpRouteDeps): Promise<void> {
  const id = sessionIdOf(ctx, undefined);
  if (id === undefined) {
    const env = deps.runtime.createEnvironment();
    try {
      sendJson(ctx.res, 200, deps.actions.state(env));
    } finally {
      env.close();
    }
    return;
  }
  const session = httpSession(deps, id);
  const snapshot = await session.enqueue(() => Promise.resolve(deps.actions.state(session.envForState())));
  sendJson(ctx.res, 200, snapshot, { [SESSION_HEADER]: session.id });
}

async function closeSession(ctx: RequestContext, deps: HttpRouteDeps): Promise<void> {
  const raw = await readObjectBody(ctx, deps, false);
  const bodyId = typeof raw['session_id'] === 'string' ? raw['session_id'] : undefined;
  const id = sessionIdOf(ctx, bodyId);
  if (id === undefined) throw validationError('Missing session_id', [{ loc: ['body', 'session_id'], msg: 'Field required', type: 'missing' }]);
  const session = httpSession(deps, id);
  await session.drained();
  deps.registry.remove(session.id);
  sendJson(ctx.res, 200, { session_id: id, closed: true });
}
