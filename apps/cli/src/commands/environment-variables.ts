import type { FlagSpec } from '../flags.ts';
import { runtimeOptionSpecs, transportOptionSpecs } from './transport-options.ts';
import { specOptionSpecs } from './spec-options.ts';
import { workerOptionSpecs } from './worker.ts';
import { trainerOptionSpecs } from './trainer.ts';
import { executionOptionSpecs } from './execution-options.ts';
import { modelDirOptionSpecs, modelSpecOptionSpecs } from './model-options.ts';
import { adapterShareOptionSpecs, inferenceOptionSpecs } from './inference-options.ts';

/** Every environment variable the rollout apps read, with the option it stands for (docs, docker-compose check). */
export function environmentVariables(): Map<string, string> {
  const out = new Map<string, string>();
  const tables: Array<Record<string, FlagSpec>> = [transportOptionSpecs, runtimeOptionSpecs, specOptionSpecs, workerOptionSpecs, trainerOptionSpecs, executionOptionSpecs, modelDirOptionSpecs, modelSpecOptionSpecs, inferenceOptionSpecs, adapterShareOptionSpecs];
  for (const table of tables) for (const [flag, spec] of Object.entries(table)) if (spec.env !== undefined) out.set(spec.env, `--${flag}`);
  return out;
}
