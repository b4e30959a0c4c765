// Test helpers of the env-server, for its own tests and for tests/ and bench/ (`@sqlenv/env-server/testing`).
export { createFakeRuntime } from './fake-runtime.ts';
export { startHarness, RawWs, waitUntil, type Harness, type CloseEvent } from './server-harness.ts';
export { createTestRuntime, oracleEpisodes, firstOracleEpisode, startTestServer, RUNAWAY_SQL, type OracleEpisode, type TestServer } from './test-runtime.ts';
