/**
 * The bare side of bench/audio/transcription.ts, in a process of its own as the appliance is in
 * its own (so neither pays for the other's garbage collection or threads): a transformers.js
 * `pipeline('automatic-speech-recognition', folder)` with the session options the appliance gives
 * its models, and what a user of the library writes to read a file: ffmpeg decoding it to mono
 * float samples at the model's rate on a pipe.
 *
 * Started by the benchmark with `fork` (argv: the model folder, the thread count, the audio files);
 * answers each message `{ id, file, decoded }` with `{ id, text }` or `{ id, error }`: `file` is
 * an index into the files, `decoded` true to transcribe samples decoded at start (the library and
 * the model alone), false to decode the file first. Sends `{ ready: true }` once loaded.
 *
 * @module
 */
import { spawn } from 'node:child_process';
import { sessionOptions } from '../../plugins/backend-transformers/onnx-model.js';
import { transformers } from '../../plugins/backend-transformers/runtime.js';

const [folder, threads, ...files] = process.argv.slice(2);
const RATE = 16000;

/** ffmpeg to mono float samples at `rate` on a pipe. */
export function ffmpegDecode(file: string, rate: number): Promise<Float32Array> {
  return new Promise((resolve, reject) => {
    const child = spawn('ffmpeg', ['-nostdin', '-hide_banner', '-loglevel', 'error', '-i', file, '-ac', '1', '-ar', String(rate), '-f', 'f32le', 'pipe:1'], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const chunks: Buffer[] = [];
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => chunks.push(c));
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    child.on('error', reject);
    child.on('close', (code) => {
      if (code !== 0) return reject(new Error(`ffmpeg exited ${code}: ${stderr}`));
      const all = Buffer.concat(chunks);
      resolve(new Float32Array(all.buffer, all.byteOffset, Math.floor(all.byteLength / 4)).slice());
    });
  });
}

if (process.send) {
  const { pipeline } = await transformers();
  const asr = await pipeline('automatic-speech-recognition', folder, {
    dtype: 'fp32',
    device: 'cpu',
    local_files_only: true,
    session_options: sessionOptions({ threads: Number(threads), maxBatchTokens: 4096, memoryArena: true, sizeBytes: 0 }),
  });
  const samples = await Promise.all(files.map((f) => ffmpegDecode(f, RATE)));
  const transcribe = async (audio: Float32Array): Promise<string> => {
    const out = (await asr(audio)) as { text: string } | { text: string }[];
    return Array.isArray(out) ? out[0]!.text : out.text;
  };
  process.on('message', (message: { id: number; file: number; decoded: boolean }) => {
    const { id, file, decoded } = message;
    (decoded ? Promise.resolve(samples[file]!) : ffmpegDecode(files[file]!, RATE)).then(transcribe).then(
      (text) => process.send!({ id, text }),
      (err: unknown) => process.send!({ id, error: String(err) }),
    );
  });
  process.on('disconnect', () => {
    void asr.dispose().then(() => process.exit(0));
  });
  process.send({ ready: true, seconds: samples.map((s) => s.length / RATE) });
}
