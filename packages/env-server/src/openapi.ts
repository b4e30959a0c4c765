import { z } from 'zod';
import {
  EpisodeStateSchema,
  HttpResetRequestSchema,
  HttpStepRequestSchema,
  HttpStepResponseSchema,
  SqlActionSchema,
  SqlObservationSchema,
  ValidationIssueSchema,
  toJsonSchema,
} from '@sqlenv/protocol';
import { CatalogDocumentSchema } from './catalog.ts';
import { ServerMetadataSchema } from './http-routes.ts';

/** Components are the zod schemas themselves, converted once: the docs cannot disagree with the validators. */
function component(schema: z.ZodType): Record<string, unknown> {
  const { $schema: _ignored, ...rest } = toJsonSchema(schema);
  return rest;
}

const ref = (name: string): { $ref: string } => ({ $ref: `#/components/schemas/${name}` });
const json = (schema: unknown): { content: { 'application/json': { schema: unknown } } } => ({ content: { 'application/json': { schema } } });

const sessionHeader = {
  name: 'X-Session-Id',
  in: 'header',
  required: false,
  description: 'HTTP session from POST /reset (alternative to the session_id body field)',
  schema: { type: 'string' },
};

/** The OpenAPI 3.1 document served at /openapi.json (3.1 uses JSON Schema 2020-12, which zod emits). */
export function buildOpenApiDocument(info: { title: string; version: string; description: string; auth: boolean }): Record<string, unknown> {
  const errors = {
    '400': { description: 'Conflicting session ids (body, X-Session-Id header, query)', ...json(ref('HTTPError')) },
    '403': { description: 'Host or Origin not allowed (--allowed-hosts)', ...json(ref('HTTPError')) },
    '404': { description: 'Unknown or expired session_id', ...json(ref('HTTPError')) },
    '422': { description: 'Validation error', ...json(ref('HTTPValidationError')) },
    '429': { description: 'Server at capacity: every session is in use and none is idle', ...json(ref('HTTPError')) },
  };
  return {
    openapi: '3.1.0',
    info: { title: info.title, version: info.version, description: info.description },
    ...(info.auth ? { security: [{ bearer: [] }] } : {}),
    paths: {
      '/health': { get: { summary: 'Health check', operationId: 'health', responses: { '200': { description: 'Healthy', ...json(ref('HealthResponse')) } } } },
      '/metadata': { get: { summary: 'Environment metadata', operationId: 'metadata', responses: { '200': { description: 'Metadata', ...json(ref('Metadata')) } } } },
      '/schema': {
        get: { summary: 'Action, observation and state JSON Schemas', operationId: 'schema', responses: { '200': { description: 'Schemas', ...json(ref('SchemaResponse')) } } },
      },
      '/reset': {
        post: {
          summary: 'Start an episode',
          description:
            'OpenEnv reset. Opens an HTTP session (returned as session_id and in X-Session-Id) unless session_id names an existing one. Callers that ignore session_id get stock stateless behaviour.',
          operationId: 'reset',
          parameters: [sessionHeader],
          requestBody: { required: false, ...json(ref('ResetRequest')) },
          responses: { '200': { description: 'Initial observation', ...json(ref('StepResponse')) }, ...errors },
        },
      },
      '/step': {
        post: {
          summary: 'Take an action',
          description: 'OpenEnv step. With a session_id (body or X-Session-Id) it continues that episode; without one it runs on a fresh environment (stateless).',
          operationId: 'step',
          parameters: [sessionHeader],
          requestBody: { required: true, ...json(ref('StepRequest')) },
          responses: { '200': { description: 'Observation, reward, done', ...json(ref('StepResponse')) }, '409': { description: 'No episode in progress', ...json(ref('HTTPError')) }, ...errors },
        },
      },
      '/state': {
        get: {
          summary: 'Episode state',
          operationId: 'state',
          parameters: [sessionHeader, { name: 'session_id', in: 'query', required: false, schema: { type: 'string' } }],
          responses: { '200': { description: 'State', ...json(ref('EpisodeState')) }, ...errors },
        },
      },
      '/close': {
        post: {
          summary: 'End an HTTP session (extension)',
          operationId: 'close',
          parameters: [sessionHeader],
          requestBody: { required: false, ...json({ type: 'object', properties: { session_id: { type: 'string' } } }) },
          responses: { '200': { description: 'Closed', ...json({ type: 'object', properties: { session_id: { type: 'string' }, closed: { type: 'boolean' } } }) }, ...errors },
        },
      },
      '/metrics': { get: { summary: 'Prometheus metrics', operationId: 'metrics', responses: { '200': { description: 'Text exposition format', content: { 'text/plain': {} } } } } },
      '/web/catalog': {
        get: { summary: 'Database and question ids a client may reset to', operationId: 'catalog', responses: { '200': { description: 'Catalog', ...json(ref('Catalog')) } } },
      },
      '/ws': {
        get: {
          summary: 'OpenEnv WebSocket session (upgrade)',
          description:
            'One environment per connection. Send {"type":"reset","data":{...}}, {"type":"step","data":{action fields}}, {"type":"state"}, {"type":"close"} or {"type":"mcp","data":{JSON-RPC}}; each gets exactly one reply frame (observation | state | error | mcp).',
          operationId: 'ws',
          responses: { '101': { description: 'Switching Protocols' } },
        },
      },
    },
    components: {
      ...(info.auth ? { securitySchemes: { bearer: { type: 'http', scheme: 'bearer' } } } : {}),
      schemas: {
        SQLAction: component(SqlActionSchema),
        SQLObservation: component(SqlObservationSchema),
        EpisodeState: component(EpisodeStateSchema),
        ResetRequest: component(HttpResetRequestSchema),
        StepRequest: component(HttpStepRequestSchema),
        StepResponse: component(HttpStepResponseSchema),
        HealthResponse: component(z.strictObject({ status: z.literal('healthy') })),
        Metadata: component(ServerMetadataSchema),
        SchemaResponse: component(z.strictObject({ action: z.record(z.string(), z.unknown()), observation: z.record(z.string(), z.unknown()), state: z.record(z.string(), z.unknown()) })),
        Catalog: component(CatalogDocumentSchema),
        HTTPValidationError: component(z.strictObject({ detail: z.array(ValidationIssueSchema) })),
        HTTPError: component(z.strictObject({ detail: z.string() })),
      },
    },
  };
}
