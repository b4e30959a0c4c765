import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { captureIo } from '@sqlenv/shared/testing';
import { serveModelCommand } from './serve-model.ts';

const tinyModel = fileURLToPath(new URL('../../../../models/sqlenv-tiny', import.meta.url));

async function run(argv: string[]): Promise<{ code: number; err: string }> {
  const io = captureIo();
  const code = await serveModelCommand(argv, { stdout: io.stdout, stderr: io.stderr, env: {} });
  return { code, err: io.text().err };
}

describe('sqlenv serve-model options', () => {
  it('needs --model (exit 2, naming it)', async () => {
    const result = await run(['--port', '0']);
    expect(result.code).toBe(2);
    expect(result.err).toMatch(/model/);
  });

  it('refuses an unknown LoRA target before starting anything (exit 2, naming targets)', async () => {
    const result = await run(['--model', tinyModel, '--port', '0', '--lora-targets', 'q_proj,no_such_proj']);
    expect(result.code).toBe(2);
    expect(result.err).toMatch(/lora\.targets/);
  });

  it('refuses a port out of range (exit 2)', async () => {
    expect((await run(['--model', tinyModel, '--port', '70000'])).code).toBe(2);
  });
});
