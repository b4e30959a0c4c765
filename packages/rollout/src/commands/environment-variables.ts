import type { OptionSpec } from './command-io.ts';
import { runtimeOptionSpecs, transportOptionSpecs } from './shared-options.ts';
import { specOptionSpecs } from './spec-options.ts';
import { workerOptionSpecs } from './worker-command.ts';
import { trainerOptionSpecs } from './trainer-command.ts';
import { executionOptionSpecs } from './execution-provider.ts';
import { modelDirOptionSpecs, modelSpecOptionSpecs } from './model-options.ts';

/** Every environment variable the rollout apps read, with the option it stands for (docs, docker-compose check). */
export function environmentVariables(): Map<string, string> {
  const out = new Map<string, string>();
  const tables: Array<Record<string, OptionSpec>> = [transportOptionSpecs, runtimeOptionSpecs, specOptionSpecs, workerOptionSpecs, trainerOptionSpecs, executionOptionSpecs, modelDirOptionSpecs, modelSpecOptionSpecs];
  for (const table of tables) for (const [flag, spec] of Object.entries(table)) if (spec.env !== undefined) out.set(spec.env, `--${flag}`);
  return out;
}
