import { readFileSync } from 'node:fs';
import { totalmem } from 'node:os';

/**
 * The memory this process may use: the smallest of the host's memory, what Node reports as the
 * process's constraint, and the cgroup limits of its own cgroup and each of its ancestors. A
 * container with a memory limit kills a process that passes it (an OOM kill, no error), so every fit
 * check and memory-derived default must compare with this, never with the host's memory alone.
 */
export const MEMORY_LIMIT_SOURCES = ['host', 'process.constrainedMemory()', 'cgroup v2 memory.max', 'cgroup v1 memory.limit_in_bytes'] as const;
export type MemoryLimitSource = (typeof MEMORY_LIMIT_SOURCES)[number];

export interface MemoryLimit {
  /** The smallest bound found. */
  bytes: number;
  /** Where `bytes` came from. */
  source: MemoryLimitSource;
  /** The cgroup file that set it (cgroup sources only). */
  path?: string;
  hostBytes: number;
}

/** What the limit is computed from: the host's memory, Node's constraint and a file reader (undefined: no such file). */
export interface MemoryLimitInputs {
  hostBytes: number;
  /** `process.constrainedMemory()`: 0 or undefined where Node knows none. */
  constrainedBytes?: number | undefined;
  /** Contents of /proc/self/cgroup (absent: only the cgroup roots are read). */
  procSelfCgroup?: string | undefined;
  readFile(path: string): string | undefined;
}

export const CGROUP_ROOT = '/sys/fs/cgroup';

/**
 * cgroup v1 writes "no limit" as the largest page-aligned counter (9223372036854771712 on 4 KiB
 * pages); anything at or above 2^60 bytes (an exbibyte) is read as none.
 */
const V1_UNLIMITED_BYTES = 2 ** 60;

/** `memory.max` of cgroup v2: bytes, or undefined for "max" and anything unreadable. */
export function parseCgroupV2Max(text: string): number | undefined {
  const value = text.trim();
  if (value === 'max' || !/^\d+$/.test(value)) return undefined;
  const bytes = Number(value);
  return bytes > 0 ? bytes : undefined;
}

/** `memory.limit_in_bytes` of cgroup v1: bytes, or undefined for the "unlimited" huge value. */
export function parseCgroupV1Limit(text: string): number | undefined {
  const value = text.trim();
  if (!/^\d+$/.test(value)) return undefined;
  const bytes = Number(value);
  return bytes > 0 && bytes < V1_UNLIMITED_BYTES ? bytes : undefined;
}

/** The process's own cgroup paths from /proc/self/cgroup: the v2 one ("0::/path") and the v1 memory controller's. */
export function ownCgroupPaths(procSelfCgroup: string): { v2?: string; v1Memory?: string } {
  const paths: { v2?: string; v1Memory?: string } = {};
  for (const line of procSelfCgroup.split('\n')) {
    const match = /^(\d+):([^:]*):(\/.*)$/.exec(line.trim());
    if (match === null) continue;
    const [, id, controllers = '', path = '/'] = match;
    if (id === '0' && controllers === '') paths.v2 = path;
    else if (controllers.split(',').includes('memory')) paths.v1Memory = path;
  }
  return paths;
}

/** A cgroup path and each of its ancestors up to the root ("/a/b" → "/a/b", "/a", "/"): a parent's limit binds its children. */
function cgroupChain(path: string): string[] {
  const parts = path.split('/').filter((p) => p !== '');
  return Array.from({ length: parts.length + 1 }, (_, i) => `/${parts.slice(0, parts.length - i).join('/')}`);
}

function joinCgroup(root: string, cgroupPath: string, file: string): string {
  return `${root}${cgroupPath === '/' ? '' : cgroupPath}/${file}`;
}

/** Every cgroup limit file that exists along the process's cgroup chains, with its parsed bound. */
function cgroupBounds(inputs: MemoryLimitInputs): { bytes: number; source: MemoryLimitSource; path: string }[] {
  const own = ownCgroupPaths(inputs.procSelfCgroup ?? '');
  const files = [
    ...cgroupChain(own.v2 ?? '/').map((p) => ({ path: joinCgroup(CGROUP_ROOT, p, 'memory.max'), source: MEMORY_LIMIT_SOURCES[2], parse: parseCgroupV2Max })),
    ...cgroupChain(own.v1Memory ?? '/').map((p) => ({ path: joinCgroup(`${CGROUP_ROOT}/memory`, p, 'memory.limit_in_bytes'), source: MEMORY_LIMIT_SOURCES[3], parse: parseCgroupV1Limit })),
  ];
  return files.flatMap(({ path, source, parse }) => {
    const text = inputs.readFile(path);
    const bytes = text === undefined ? undefined : parse(text);
    return bytes === undefined ? [] : [{ bytes, source, path }];
  });
}

/** The memory limit from its inputs (pure: the tests give file contents). */
export function memoryLimitFrom(inputs: MemoryLimitInputs): MemoryLimit {
  let limit: MemoryLimit = { bytes: inputs.hostBytes, source: 'host', hostBytes: inputs.hostBytes };
  const constrained = inputs.constrainedBytes ?? 0;
  if (constrained > 0 && constrained < limit.bytes) limit = { ...limit, bytes: constrained, source: 'process.constrainedMemory()' };
  // Node reads the same cgroup files: on a tie the file is named, which tells an operator what to change.
  for (const bound of cgroupBounds(inputs)) if (bound.bytes < limit.bytes || (bound.bytes === limit.bytes && limit.source !== 'host')) limit = { ...limit, ...bound };
  return limit;
}

function readIfPresent(path: string): string | undefined {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return undefined;
  }
}

/** This process's memory limit, read now (os.totalmem(), process.constrainedMemory(), the cgroup files). */
export function readMemoryLimit(): MemoryLimit {
  return memoryLimitFrom({ hostBytes: totalmem(), constrainedBytes: process.constrainedMemory?.(), procSelfCgroup: readIfPresent('/proc/self/cgroup'), readFile: readIfPresent });
}

/** "the cgroup v2 memory.max limit (/sys/fs/cgroup/memory.max)" / "this host's memory": for messages. */
export function describeMemoryLimit(limit: MemoryLimit): string {
  if (limit.source === 'host') return "this host's memory";
  return `the ${limit.source} limit${limit.path === undefined ? '' : ` (${limit.path})`}`;
}
