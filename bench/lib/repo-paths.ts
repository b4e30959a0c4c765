/** Where the bench scripts find the repository and its CLI. */
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const repoRoot = fileURLToPath(new URL('../..', import.meta.url));
export const benchDir = join(repoRoot, 'bench');
export const sqlenvBin = join(repoRoot, 'apps', 'cli', 'bin', 'sqlenv.js');
