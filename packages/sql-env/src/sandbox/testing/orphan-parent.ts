/**
 * Test fixture (tests/sql-sandbox.test.ts): a parent process that starts an
 * executor, sets a runaway query going, prints its child's pid and waits to
 * be SIGKILLed. The test then checks that the orphaned child dies too.
 *   node --import tsx orphan-parent.ts <dbPath>
 */
import { SqlExecutor } from '../sql-executor.ts';

const dbPath = process.argv[2] ?? '';
const executor = new SqlExecutor({ poolSize: 1, spareChildren: 0, timeoutMs: 600_000 });
await executor.whenReady();
executor.query(dbPath, 'WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c').catch(() => {});
// Let the request reach the child before reporting.
await new Promise((resolve) => setTimeout(resolve, 200));
process.stdout.write(`${JSON.stringify({ pids: executor.childPids() })}\n`);
setInterval(() => {}, 1_000);
