// Child process for placement.ts: create a session at VERBOSE log level so ORT
// prints its "Node placements" block on stderr, then exit. Plain JS: no loader needed.
import * as ort from 'onnxruntime-node';

const [modelPath, optionsJson] = process.argv.slice(2);
const session = await ort.InferenceSession.create(modelPath, JSON.parse(optionsJson));
await session.release();
