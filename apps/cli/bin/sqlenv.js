#!/usr/bin/env node
// The `sqlenv` command. The project runs its TypeScript sources directly:
// register tsx, then hand over to the typed entry point.
import { register } from 'tsx/esm/api';

register();
const { main } = await import('../src/main.ts');
process.exitCode = await main(process.argv.slice(2));
