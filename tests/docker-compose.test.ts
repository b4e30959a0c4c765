import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import Ajv from 'ajv';
import yaml from 'js-yaml';
import { describe, expect, it } from 'vitest';
import { environmentVariables } from '@sqlenv/cli';
import { RunModelSpecSchema } from '@sqlenv/protocol';

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
 * Compose's merge for the keys our overrides touch: mappings merge key by key (build, environment,
 * deploy, depends_on, new services), scalars and other sequences are replaced (image, command), a
 * service's `volumes` merge by mount target, `!reset` removes the key. The tests below pin the
 * overrides to those keys, so this is the specification's result, not an approximation of it.
 */
function merge(base: Json, override: Json | typeof RESET, path: readonly string[] = []): Json | typeof RESET {
  if (override === RESET) return RESET;
  if (path.length === 3 && path[0] === 'services' && path[2] === 'volumes' && Array.isArray(base) && Array.isArray(override)) {
    const byTarget = new Map([...base, ...override].map((v) => [mountTarget(v), v]));
    return [...byTarget.values()];
  }
  if (base !== null && override !== null && typeof base === 'object' && typeof override === 'object' && !Array.isArray(base) && !Array.isArray(override)) {
    const out: Record<string, Json> = { ...base };
    for (const [key, value] of Object.entries(override as Record<string, Json | typeof RESET>)) {
      const merged = key in out ? merge(out[key] as Json, value, [...path, key]) : value;
      if (merged === RESET) delete out[key];
      else out[key] = merged;
    }
    return out;
  }
  return override;
}

/** Where a service volume is mounted: `source:target[:mode]`, `target`, or the long form's `target`. */
function mountTarget(volume: Json): string {
  if (typeof volume === 'string') {
    const parts = volume.split(':');
    return (parts.length === 1 ? parts[0] : parts[1]) as string;
  }
  return String((volume as Record<string, Json>)['target']);
}

/** The named volume a short-syntax service volume uses (null for a bind mount of a host path). */
function namedVolume(volume: Json): string | null {
  const source = typeof volume === 'string' ? (volume.includes(':') ? volume.split(':')[0] : null) : ((volume as Record<string, Json>)['source'] as string | undefined);
  return source === undefined || source === null || /^[./~]/.test(source) ? null : source;
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

describe('docker-compose.vllm.yml (GPU cluster: vLLM servers sample, workers without GPUs)', () => {
  const validate = validator();
  const base = load('docker-compose.yml');
  const overlay = load('docker-compose.vllm.yml');
  const merged = merge(base, overlay) as Record<string, Json>;
  const all = services(merged);
  const vllmNames = Object.keys(all).filter((n) => n.startsWith('vllm-'));
  const flagValue = (command: Json | undefined, flag: string): string | undefined => {
    const args = command as string[];
    const i = args.indexOf(flag);
    return i < 0 ? undefined : args[i + 1];
  };

  it('is valid merged onto the base file, and only touches keys whose merge the checker reproduces', () => {
    expect(validate(merged)).toEqual([]);
    const raw = yaml.load(read('docker-compose.vllm.yml'), { schema: composeSchema }) as { services: Record<string, Record<string, unknown>> };
    expect(Object.keys(raw).filter((k) => !k.startsWith('x-'))).toEqual(['services', 'volumes']);
    for (const [name, service] of Object.entries(raw.services)) {
      if (name.startsWith('vllm-')) continue;
      expect(Object.keys(services(base))).toContain(name);
      for (const key of Object.keys(service)) expect(['build', 'image', 'environment', 'deploy', 'volumes', 'depends_on'], `${name}.${key}`).toContain(key);
    }
    expect(vllmNames).toEqual(['vllm-0', 'vllm-1']);
  });

  it('each vLLM server: one GPU of its own (never the trainer\'s), LoRA at runtime, processed log-probs, vLLM sampling defaults, /health', () => {
    const trainerGpus = String(all['trainer']?.environment?.['SQLENV_GPUS']).split(',');
    const claimed = vllmNames.map((name) => {
      const server = all[name] as Service;
      expect(String(server['image'])).toMatch(/^vllm\/vllm-openai:v\d+\.\d+\.\d+$/);
      const command = server['command'];
      expect(command, name).toContain('--enable-lora');
      expect(flagValue(command, '--logprobs-mode')).toBe('processed_logprobs');
      expect(flagValue(command, '--generation-config')).toBe('vllm');
      expect(server.environment?.['VLLM_ALLOW_RUNTIME_LORA_UPDATING']).toBe('True');
      // Room for every version a worker may still sample from: max staleness + the newest + one loading.
      expect(Number(flagValue(command, '--max-loras'))).toBeGreaterThanOrEqual(Number(all['coordinator']?.environment?.['SQLENV_MAX_STALENESS']) + 2);
      expect(Number(flagValue(command, '--max-lora-rank'))).toBeGreaterThanOrEqual(RunModelSpecSchema.parse({ fingerprint: 'x' }).lora.rank);
      expect(String(flagValue(command, '--model'))).toMatch(/^\/models\//);
      expect(JSON.stringify(server['healthcheck'])).toContain(`127.0.0.1:${String(flagValue(command, '--port'))}/health'`);
      const devices = gpuDevices(server) as { device_ids: string[]; count?: unknown }[];
      expect(devices).toHaveLength(1);
      expect(devices[0]?.count).toBeUndefined();
      expect(devices[0]?.device_ids).toHaveLength(1);
      return devices[0]?.device_ids[0] as string;
    });
    expect(new Set(claimed).size).toBe(claimed.length);
    for (const gpu of claimed) expect(trainerGpus).not.toContain(gpu);
    // The model follows the deployment's SQLENV_MODEL_DIR, as the workers' and the trainer's does.
    const custom = services(merge(load('docker-compose.yml', { SQLENV_MODEL_DIR: '/models/Qwen3-1.7B' }), load('docker-compose.vllm.yml', { SQLENV_MODEL_DIR: '/models/Qwen3-1.7B' })) as Record<string, Json>);
    expect(flagValue(custom['vllm-0']?.['command'], '--model')).toBe('/models/Qwen3-1.7B');
    expect(custom['worker']?.environment?.['SQLENV_MODEL_DIR']).toBe('/models/Qwen3-1.7B');
  });

  it('workers: no GPU, the CPU image, every server in SQLENV_INFERENCE_URL under the name it serves, started once the servers are healthy', () => {
    const worker = all['worker'] as Service;
    expect(gpuDevices(worker)).toBeUndefined();
    expect(worker['image']).toBe('sqlenv-ts:cpu');
    expect(worker.environment?.['SQLENV_EXECUTION_PROVIDER']).toBe('cpu');
    const urls = String(worker.environment?.['SQLENV_INFERENCE_URL']).split(',');
    expect(urls).toEqual(vllmNames.map((name) => `http://${name}:${String(flagValue(all[name]?.['command'], '--port'))}`));
    for (const name of vllmNames) {
      expect(flagValue(all[name]?.['command'], '--served-model-name')).toBe(worker.environment?.['SQLENV_INFERENCE_MODEL']);
      expect((worker['depends_on'] as Record<string, Record<string, string>>)[name]).toEqual({ condition: 'service_healthy' });
    }
    expect((worker['depends_on'] as Record<string, unknown>)['redis']).toBeDefined(); // the base file's, kept
    // One API key for servers and workers.
    expect(load('docker-compose.vllm.yml', { SQLENV_INFERENCE_API_KEY: 'k' })['services']).toMatchObject({ 'vllm-0': { environment: { VLLM_API_KEY: 'k' } }, worker: { environment: { SQLENV_INFERENCE_API_KEY: 'k' } } });
  });

  it('the trainer keeps its GPU and writes the adapter share that the servers and workers mount at the same path', () => {
    const trainer = all['trainer'] as Service;
    expect(gpuDevices(trainer)).toEqual([{ driver: 'nvidia', count: 'all', capabilities: ['gpu'] }]);
    const share = String(trainer.environment?.['SQLENV_ADAPTER_SHARE']);
    const mountOf = (service: Service): string | undefined => (service['volumes'] as string[]).find((v) => mountTarget(v) === share);
    const trainerMount = mountOf(trainer);
    expect(trainerMount).toBe(`adapters:${share}`); // read-write
    for (const name of [...vllmNames, 'worker']) {
      expect(mountOf(all[name] as Service), name).toBe(`adapters:${share}:ro`);
    }
    expect(all['worker']?.environment?.['SQLENV_ADAPTER_SHARE']).toBe(share);
    // The base file's mounts are kept (volumes merge by target).
    expect(trainer['volumes']).toEqual(expect.arrayContaining(['sqlenv-data:/data', 'gpu-locks:/run/sqlenv-gpus']));
  });

  it('every named volume a service mounts is defined, in each deployment', () => {
    for (const doc of [base, merge(base, load('docker-compose.cpu.yml')) as Record<string, Json>, merged]) {
      const defined = Object.keys((doc['volumes'] ?? {}) as Record<string, Json>);
      for (const [name, service] of Object.entries(services(doc))) {
        for (const volume of (service['volumes'] ?? []) as Json[]) {
          const named = namedVolume(volume);
          if (named !== null) expect(defined, `${name}: ${JSON.stringify(volume)}`).toContain(named);
        }
      }
    }
  });

  it('sets only environment variables that the apps, the GPU entry script or the remote client read', () => {
    const entryScriptVariables = [...read('docker/gpu-entry.sh').matchAll(/\b(SQLENV_[A-Z_]+)/g)].map((m) => m[1] as string);
    const known = new Set([...environmentVariables().keys(), ...entryScriptVariables]);
    for (const name of ['coordinator', 'worker', 'trainer']) {
      expect(Object.keys(all[name]?.environment ?? {}).filter((k) => !known.has(k)), name).toEqual([]);
    }
    expect(known.has('SQLENV_TIS_CAP')).toBe(true);
  });
});
