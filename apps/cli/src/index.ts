export { main } from './main.ts';
export { commands, type Command } from './commands.ts';
export { writeSftData } from './commands/sft-data.ts';
export type { CommandIo } from './io.ts';
