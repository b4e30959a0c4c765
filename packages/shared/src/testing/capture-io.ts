import { Writable } from 'node:stream';

/** Two writable streams that keep what a command writes, for tests that check its output. */
export function captureIo(): { stdout: Writable; stderr: Writable; text: () => { out: string; err: string } } {
  let out = '';
  let err = '';
  return {
    stdout: new Writable({ write: (chunk: Buffer, _e, done) => ((out += chunk.toString()), done()) }),
    stderr: new Writable({ write: (chunk: Buffer, _e, done) => ((err += chunk.toString()), done()) }),
    text: () => ({ out, err }),
  };
}
