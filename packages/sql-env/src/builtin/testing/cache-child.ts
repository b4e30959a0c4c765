// Child process for builtin-dataset-dir.test.ts: waits for "go", then asks for
// the built-in dataset directory, so several processes race on one cache dir.
import { builtinDatasetDir } from '../builtin-dataset-dir.ts';

const cacheDir = process.argv[2];
if (cacheDir === undefined || process.send === undefined) throw new Error('usage: fork(cache-child.ts, [cacheDir])');
const send = process.send.bind(process);
process.once('message', () => {
  builtinDatasetDir(cacheDir).then(
    (dir) => send({ dir }, () => process.exit(0)),
    (error: unknown) => send({ error: String(error) }, () => process.exit(1)),
  );
});
send({ ready: true });
