import { Worker } from 'node:worker_threads';
import { describe, expect, it } from 'vitest';
import { AppError, ErrorCode } from './app-error.ts';
import { WorkerRpc } from './worker-rpc.ts';

type Request = { id: number; op: 'echo' | 'fail' | 'exit' | 'hang'; value: number };
type Reply = { id: number; ok: boolean; value: number };

/** A thread that answers echo and fail, exits on exit, and never answers hang. */
function echoWorker(): Worker {
  return new Worker(
    `const { parentPort } = require('node:worker_threads');
     parentPort.on('message', (m) => {
       if (m.op === 'echo') parentPort.postMessage({ id: m.id, ok: true, value: m.value * 2 });
       else if (m.op === 'fail') parentPort.postMessage({ id: m.id, ok: false, value: m.value });
       else if (m.op === 'exit') process.exit(3);
     });
     parentPort.postMessage({ note: 'not a reply' });`,
    { eval: true },
  );
}

function rpcOver(worker: Worker): WorkerRpc<Request, Reply> {
  return new WorkerRpc<Request, Reply>(worker, {
    name: 'test worker',
    replyId: (m) => (typeof m.id === 'number' ? m.id : undefined),
    replyError: (m) => (m.ok ? undefined : new AppError(ErrorCode.RUNTIME, `failed ${m.value}`)),
  });
}

describe('WorkerRpc', () => {
  it('matches replies to their calls, in any order, and turns failure replies into errors', async () => {
    const rpc = rpcOver(echoWorker());
    const [a, b, c] = await Promise.allSettled([
      rpc.call((id) => ({ id, op: 'echo', value: 1 })),
      rpc.call((id) => ({ id, op: 'fail', value: 7 })),
      rpc.call((id) => ({ id, op: 'echo', value: 5 })),
    ]);
    expect(a.status === 'fulfilled' && a.value.value).toBe(2);
    expect(b.status === 'rejected' && (b.reason as AppError).message).toBe('failed 7');
    expect(c.status === 'fulfilled' && c.value.value).toBe(10);
    await rpc.close();
  });

  it('a thread that exits fails the call in flight, one left hanging, and every later call with the same error', async () => {
    const rpc = rpcOver(echoWorker());
    const hanging = rpc.call((id) => ({ id, op: 'hang', value: 0 })).catch((e: unknown) => e);
    const exiting = rpc.call((id) => ({ id, op: 'exit', value: 0 })).catch((e: unknown) => e);
    expect(await exiting).toMatchObject({ code: ErrorCode.EXECUTOR_CRASHED, message: 'test worker exited with code 3' });
    expect(await hanging).toMatchObject({ code: ErrorCode.EXECUTOR_CRASHED });
    expect(rpc.crashed?.code).toBe(ErrorCode.EXECUTOR_CRASHED);
    await expect(rpc.call((id) => ({ id, op: 'echo', value: 1 }))).rejects.toBe(rpc.crashed);
    await rpc.close();
  });

  it('close() aborts the calls in flight, refuses later ones, and is idempotent', async () => {
    const rpc = rpcOver(echoWorker());
    const hanging = rpc.call((id) => ({ id, op: 'hang', value: 0 })).catch((e: unknown) => e);
    await rpc.close('closed for the test');
    expect(await hanging).toMatchObject({ code: ErrorCode.ABORTED, message: 'closed for the test' });
    await expect(rpc.call((id) => ({ id, op: 'echo', value: 1 }))).rejects.toMatchObject({ code: ErrorCode.ABORTED });
    await rpc.close();
    expect(rpc.crashed).toBeUndefined();
  });
});
