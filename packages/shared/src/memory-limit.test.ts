import { describe, expect, it } from 'vitest';
import { describeMemoryLimit, memoryLimitFrom, ownCgroupPaths, parseCgroupV1Limit, parseCgroupV2Max } from './memory-limit.ts';

const GB = 1e9;
const host = 64 * GB;

/** A reader over fixture files (path → contents); any other path does not exist. */
function files(contents: Record<string, string>): (path: string) => string | undefined {
  return (path) => contents[path];
}

describe('memory limit', () => {
  it('parses cgroup v2 memory.max ("max" is none) and v1 limit_in_bytes (the huge "unlimited" is none)', () => {
    expect(parseCgroupV2Max('2147483648\n')).toBe(2147483648);
    expect(parseCgroupV2Max('max\n')).toBeUndefined();
    expect(parseCgroupV2Max('garbage')).toBeUndefined();
    expect(parseCgroupV1Limit('1073741824\n')).toBe(1073741824);
    expect(parseCgroupV1Limit('9223372036854771712\n')).toBeUndefined();
  });

  it('finds the own v2 path and the v1 memory controller path in /proc/self/cgroup', () => {
    expect(ownCgroupPaths('0::/system.slice/app.service\n')).toEqual({ v2: '/system.slice/app.service' });
    expect(ownCgroupPaths('5:cpu,cpuacct:/x\n4:memory:/docker/abc\n0::/\n')).toEqual({ v1Memory: '/docker/abc', v2: '/' });
  });

  it('is the host memory where nothing else bounds it', () => {
    const limit = memoryLimitFrom({ hostBytes: host, constrainedBytes: 0, readFile: files({ '/sys/fs/cgroup/memory.max': 'max\n' }) });
    expect(limit).toEqual({ bytes: host, source: 'host', hostBytes: host });
    expect(describeMemoryLimit(limit)).toBe("this host's memory");
  });

  it('takes a cgroup v2 memory.max at the root of a namespaced container', () => {
    const limit = memoryLimitFrom({ hostBytes: host, procSelfCgroup: '0::/\n', readFile: files({ '/sys/fs/cgroup/memory.max': '2147483648\n' }) });
    expect(limit).toMatchObject({ bytes: 2147483648, source: 'cgroup v2 memory.max', path: '/sys/fs/cgroup/memory.max' });
    expect(describeMemoryLimit(limit)).toBe('the cgroup v2 memory.max limit (/sys/fs/cgroup/memory.max)');
  });

  it('follows /proc/self/cgroup to a nested v2 path and takes the smallest limit along its ancestors', () => {
    const readFile = files({
      '/sys/fs/cgroup/memory.max': 'max\n',
      '/sys/fs/cgroup/kubepods/memory.max': '8000000000\n',
      '/sys/fs/cgroup/kubepods/pod1/memory.max': 'max\n',
      '/sys/fs/cgroup/kubepods/pod1/app/memory.max': '3000000000\n',
    });
    expect(memoryLimitFrom({ hostBytes: host, procSelfCgroup: '0::/kubepods/pod1/app\n', readFile })).toMatchObject({ bytes: 3e9, path: '/sys/fs/cgroup/kubepods/pod1/app/memory.max' });
    const parentBinds = files({ '/sys/fs/cgroup/kubepods/memory.max': '1000000000\n', '/sys/fs/cgroup/kubepods/pod1/app/memory.max': '3000000000\n' });
    expect(memoryLimitFrom({ hostBytes: host, procSelfCgroup: '0::/kubepods/pod1/app\n', readFile: parentBinds })).toMatchObject({ bytes: 1e9, path: '/sys/fs/cgroup/kubepods/memory.max' });
  });

  it('takes a cgroup v1 memory.limit_in_bytes on the memory controller path, not the unlimited value', () => {
    const procSelfCgroup = '4:memory:/docker/abc\n3:cpu,cpuacct:/docker/abc\n';
    const readFile = files({
      '/sys/fs/cgroup/memory/memory.limit_in_bytes': '9223372036854771712\n',
      '/sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes': '4294967296\n',
    });
    expect(memoryLimitFrom({ hostBytes: host, procSelfCgroup, readFile })).toMatchObject({ bytes: 4294967296, source: 'cgroup v1 memory.limit_in_bytes' });
    const unlimited = files({ '/sys/fs/cgroup/memory/memory.limit_in_bytes': '9223372036854771712\n' });
    expect(memoryLimitFrom({ hostBytes: host, procSelfCgroup, readFile: unlimited }).source).toBe('host');
  });

  it('takes process.constrainedMemory() only when non-zero and below the host, and a smaller cgroup limit over it', () => {
    const none = files({});
    expect(memoryLimitFrom({ hostBytes: host, constrainedBytes: 5 * GB, readFile: none })).toMatchObject({ bytes: 5 * GB, source: 'process.constrainedMemory()' });
    expect(memoryLimitFrom({ hostBytes: host, constrainedBytes: 2 ** 64, readFile: none }).source).toBe('host');
    expect(memoryLimitFrom({ hostBytes: host, constrainedBytes: 5 * GB, readFile: files({ '/sys/fs/cgroup/memory.max': '2000000000' }) })).toMatchObject({ bytes: 2 * GB });
    // A limit above the host's memory binds nothing.
    expect(memoryLimitFrom({ hostBytes: host, readFile: files({ '/sys/fs/cgroup/memory.max': String(2 * host) }) }).source).toBe('host');
  });
});
