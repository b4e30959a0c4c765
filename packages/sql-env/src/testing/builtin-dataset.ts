import { createSqlEnvRuntime } from '../runtime.ts';

/**
 * Generates the built-in dataset into its cache, so that the processes a test starts next find it
 * there instead of all generating it at the same time.
 */
export async function prepareBuiltinDataset(): Promise<void> {
  const runtime = await createSqlEnvRuntime({ dataset: 'builtin' });
  await runtime.close();
}
