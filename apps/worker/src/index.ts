export { workerCommand } from '@sqlenv/cli';
