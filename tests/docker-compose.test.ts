import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import Ajv from 'ajv';
import yaml from 'js-yaml';
import { describe, expect, it } from 'vitest';
import { environmentVariables } from '@sqlenv/cli';

/**
 * No Docker engine runs where this project is developed, so the compose files are checked the way
 * `docker compose config` would: variables interpolated, override files merged (Compose
 * Specification merge rules, `!reset` included), and the result validated against the official
 * Compose Specification JSON schema (docker/compose-spec/compose-spec.json, vendored with its source).
 */
const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const read = (file: string): string => readFileSync(path.join(root, file), 'utf8');

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
const RESET = Symbol('reset');

// `!reset` on any node kind: the merge removes the key (Compose Specification, 13-merge.md).
const resetTypes = (['scalar', 'sequence', 'mapping'] as const).map((kind) => new yaml.Type('!reset', { kind, construct: () => RESET }));
const composeSchema = yaml.DEFAULT_SCHEMA.extend(resetTypes);

/** `${VAR}`, `${VAR:-default}`, `${VAR-default}` as compose interpolates them (unset → default or ''). */
function interpolate(value: Json | typeof RESET, env: Record<string, string>): Json | typeof RESET {
  if (typeof value === 'string') {
    return value.replace(/\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?-)([^}]*))?\}/g, (_, name: string, op: string | undefined, fallback: string | undefined) => {
      const set = env[name];
      if (op === ':-') return set === undefined || set === '' ? (fallback ?? '') : set;
      if (op === '-') return set === undefined ? (fallback ?? '') : set;
      return set ?? '';
    });
  }
  if (Array.isArray(value)) return value.map((v) => interpolate(v, env) as Json);
  if (value !== null && typeof value === 'object') return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, interpolate(v, env)])) as Json;
  return value;
}

function load(file: string, env: Record<string, string> = {}): Record<string, Json> {
  return interpolate(yaml.load(read(file), { schema: composeSchema }) as Json, env) as Record<string, Json>;
}

/**
 * Compose's merge for the keys our override touches: mappings merge key by key (build, environment,
 * deploy), scalars are replaced (image), `!reset` removes the key. The test below pins the override
 * to those keys, so this is the specification's result, not an approximation of it.
 */
function merge(base: Json, override: Json | typeof RESET): Json | typeof RESET {
  if (override === RESET) return RESET;
  if (base !== null && override !== null && typeof base === 'object' && typeof override === 'object' && !Array.isArray(base) && !Array.isArray(override)) {
    const out: Record<string, Json> = { ...base };
    for (const [key, value] of Object.entries(override as Record<string, Json | typeof RESET>)) {
      const merged = key in out ? merge(out[key] as Json, value) : value;
      if (merged === RESET) delete out[key];
      else out[key] = merged;
    }
    return out;
  }
  return override;
}

function validator(): (doc: unknown) => string[] {
  const ajv = new Ajv({ allErrors: true, unknownFormats: 'ignore' });
  // The schema names draft-07 by its https id; ajv 6 ships the same meta-schema under http.
  ajv.addMetaSchema(JSON.parse(read('node_modules/ajv/lib/refs/json-schema-draft-07.json')) as object, 'https://json-schema.org/draft-07/schema');
  const validate = ajv.compile(JSON.parse(read('docker/compose-spec/compose-spec.json')) as object);
  return (doc) => (validate(doc) ? [] : (validate.errors ?? []).map((e) => `${e.dataPath} ${e.message ?? ''}`));
}

type Service = Record<string, Json> & { environment?: Record<string, Json>; deploy?: Json };
const services = (doc: Record<string, Json>): Record<string, Service> => doc['services'] as Record<string, Service>;
const gpuDevices = (service: Service): unknown =>
  ((service.deploy as Record<string, Record<string, Record<string, unknown>>> | undefined)?.['resources']?.['reservations'] ?? {})['devices'];

describe('docker-compose.yml (GPU host) and docker-compose.cpu.yml (CPU host)', () => {
  const validate = validator();
  const gpu = load('docker-compose.yml');
  const cpu = merge(gpu, load('docker-compose.cpu.yml')) as Record<string, Json>;

  it('are valid under the Compose Specification schema, alone and merged', () => {
    expect(validate(gpu)).toEqual([]);
    expect(validate(cpu)).toEqual([]);
    // The checker itself catches what compose would refuse.
    const broken = merge(gpu, { services: { worker: { replicas: 2 }, trainer: { restart: 5 } } }) as Record<string, Json>;
    expect(validate(broken).join('\n')).toMatch(/services\['worker'\] should NOT have additional properties[\s\S]*restart should be string/);
  });

  it('the CPU override only touches keys whose merge is a mapping merge or a replacement', () => {
    const override = yaml.load(read('docker-compose.cpu.yml'), { schema: composeSchema }) as { services: Record<string, Record<string, unknown>> };
    expect(Object.keys(override)).toEqual(['services']);
    for (const service of Object.values(override.services)) for (const key of Object.keys(service)) expect(['build', 'image', 'environment', 'deploy']).toContain(key);
  });

  it('GPU host: workers and trainers reserve every GPU and claim one each through the entry script', () => {
    const { worker, trainer, coordinator } = services(gpu);
    for (const service of [worker, trainer]) {
      // count: 1 would hand every replica device 0 (the engine exposes the first `count` GPUs).
      expect(gpuDevices(service as Service)).toEqual([{ driver: 'nvidia', count: 'all', capabilities: ['gpu'] }]);
      expect(service?.environment?.['SQLENV_EXECUTION_PROVIDER']).toBe('cuda');
      // The lock directory the script defaults to is a volume shared by the host's GPU containers.
      const lockDir = /SQLENV_GPU_LOCK_DIR:-([^}]+)\}/.exec(read('docker/gpu-entry.sh'))?.[1];
      expect(service?.['volumes']).toContain(`gpu-locks:${lockDir}`);
    }
    // Trainers claim from the trainer GPUs; workers from the rest.
    expect(trainer?.environment?.['SQLENV_GPUS']).toBe('0');
    expect(worker?.environment?.['SQLENV_GPUS_EXCLUDE']).toBe('0');
    const custom = services(load('docker-compose.yml', { SQLENV_TRAINER_GPUS: '0,1' }));
    expect([custom['trainer']?.environment?.['SQLENV_GPUS'], custom['worker']?.environment?.['SQLENV_GPUS_EXCLUDE']]).toEqual(['0,1', '0,1']);
    expect(gpuDevices(coordinator as Service)).toBeUndefined();
    expect(read('docker/Dockerfile.gpu')).toMatch(/^ENTRYPOINT \["\/app\/docker\/gpu-entry\.sh"\]$/m);
  });

  it('CPU host: nothing reserves a GPU, the GPU services run the CPU image on the CPU provider', () => {
    for (const [name, service] of Object.entries(services(cpu))) expect(gpuDevices(service), name).toBeUndefined();
    for (const name of ['worker', 'trainer']) {
      const service = services(cpu)[name];
      expect(service?.['image']).toBe('sqlenv-ts:cpu');
      expect(service?.['build']).toEqual({ context: '.', dockerfile: 'docker/Dockerfile' });
      expect(service?.environment?.['SQLENV_EXECUTION_PROVIDER']).toBe('cpu');
      // Everything else is kept: Redis, the healthcheck, the volumes.
      expect(service?.environment?.['REDIS_URL']).toBe('redis://redis:6379');
      expect(service?.['healthcheck']).toEqual(services(gpu)[name]?.['healthcheck']);
    }
    expect(read('docker/Dockerfile')).not.toMatch(/^ENTRYPOINT/m);
  });

  it('healthchecks call /healthz on the metrics port; Redis refuses writes rather than evicting', () => {
    for (const name of ['coordinator', 'worker', 'trainer']) {
      const service = services(gpu)[name];
      const port = service?.environment?.['METRICS_PORT'];
      expect(JSON.stringify(service?.['healthcheck'])).toContain(`127.0.0.1:${String(port)}/healthz`);
      // The apps bind loopback by default; Prometheus on the compose network needs every interface.
      for (const file of [gpu, cpu]) expect(services(file)[name]?.environment?.['SQLENV_METRICS_HOST'], name).toBe('0.0.0.0');
    }
    expect(services(gpu)['redis']?.['command']).toEqual(['redis-server', '--maxmemory', '0', '--maxmemory-policy', 'noeviction', '--appendonly', 'yes']);
  });

  it('sets only environment variables that the apps or the GPU entry script read', () => {
    const entryScriptVariables = [...read('docker/gpu-entry.sh').matchAll(/\b(SQLENV_[A-Z_]+)/g)].map((m) => m[1] as string);
    const known = new Set([...environmentVariables().keys(), ...entryScriptVariables]);
    for (const name of ['coordinator', 'worker', 'trainer']) {
      const keys = Object.keys(services(cpu)[name]?.environment ?? {}).concat(Object.keys(services(gpu)[name]?.environment ?? {}));
      expect(keys.filter((k) => !known.has(k)), name).toEqual([]);
    }
  });
});
