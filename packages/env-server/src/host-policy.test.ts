import { describe, expect, it } from 'vitest';
import { createHostPolicy, hostnameOf } from './host-policy.ts';

describe('hostnameOf', () => {
  it('strips the port, the brackets of IPv6 and a trailing dot; lowercases', () => {
    expect(hostnameOf('Example.COM.:8000')).toBe('example.com');
    expect(hostnameOf('[::1]:80')).toBe('::1');
    expect(hostnameOf('localhost')).toBe('localhost');
    expect(hostnameOf('::1')).toBeUndefined();
    expect(hostnameOf('')).toBeUndefined();
  });
});

describe('createHostPolicy', () => {
  const loopbackOnly = createHostPolicy([]);

  it('serves loopback names and IP literals by default, not other names', () => {
    for (const host of ['localhost:8000', '127.0.0.1', '127.1.2.3:1', '[::1]:8000', 'app.localhost', '10.0.0.7:8000', '[2001:db8::1]:8000', undefined]) {
      expect(loopbackOnly.allowsHost(host), String(host)).toBe(true);
    }
    for (const host of ['evil.example', 'localhost.evil.example', 'env-server:8000', 'garbage:1:2']) expect(loopbackOnly.allowsHost(host), host).toBe(false);
  });

  it('accepts no Origin, loopback origins on any port and the own origin; refuses other pages, IP ones included', () => {
    expect(loopbackOnly.allowsOrigin(undefined, 'evil.example')).toBe(true);
    expect(loopbackOnly.allowsOrigin('http://localhost:3000', '127.0.0.1:8000')).toBe(true);
    expect(loopbackOnly.allowsOrigin('http://10.0.0.7:8000', '10.0.0.7:8000')).toBe(true);
    expect(loopbackOnly.allowsOrigin('http://10.0.0.8:8000', '10.0.0.7:8000')).toBe(false);
    // DNS rebinding: same origin as the Host, but the Host itself is not allowed.
    expect(loopbackOnly.allowsOrigin('http://evil.example:8000', 'evil.example:8000')).toBe(false);
    expect(loopbackOnly.allowsOrigin('null', '127.0.0.1:8000')).toBe(false);
    expect(loopbackOnly.allowsOrigin('chrome-extension://abc', '127.0.0.1:8000')).toBe(false);
  });

  it('adds configured names (.name with subdomains) and * allows all', () => {
    const named = createHostPolicy(['sqlenv.example', '.corp.example']);
    expect(named.allowsHost('sqlenv.example:443')).toBe(true);
    expect(named.allowsHost('a.corp.example')).toBe(true);
    expect(named.allowsHost('corp.example')).toBe(true);
    expect(named.allowsHost('a.sqlenv.example')).toBe(false);
    expect(named.allowsOrigin('https://sqlenv.example', '127.0.0.1:8000')).toBe(true);
    const any = createHostPolicy(['*']);
    expect(any.allowsHost('evil.example')).toBe(true);
    expect(any.allowsOrigin('null', 'evil.example')).toBe(true);
  });
});
