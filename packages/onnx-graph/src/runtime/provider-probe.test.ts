import { describe, expect, it } from 'vitest';
import { AppError, ErrorCode } from '@sqlenv/shared';
import { probeExecutionProvider } from './provider-probe.ts';

describe('probeExecutionProvider', () => {
  it('runs the probe graph on the CPU and reports it', async () => {
    const report = await probeExecutionProvider('cpu');
    expect(report.requested).toBe('cpu');
    expect(report.elapsedMs).toBeGreaterThanOrEqual(0);
  });

  it('fails loudly, naming what is missing, when CUDA is asked for and not there', async () => {
    // This machine has the CPU build of onnxruntime-node and no GPU: the CUDA provider cannot load.
    const error = await probeExecutionProvider('cuda').then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(AppError);
    expect((error as AppError).code).toBe(ErrorCode.RUNTIME);
    expect((error as AppError).message).toMatch(/execution provider 'cuda' could not be loaded: .*CUDA 12 and cuDNN 9/);
  }, 60_000);
});
