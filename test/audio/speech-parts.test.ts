/**
 * The pure parts of speech out: the input cut into sentences (and long ones at a comma or a
 * space), the voice picked (the model's own names, OpenAI's mapped in turn, else a 400 naming
 * `voice`), ffmpeg's `atempo` chain for a speed, a VITS config's voices, a streamed WAV's
 * unknown sizes filled in before decoding; and the encoder: a 503 naming the package without
 * ffmpeg, the same bytes for the same samples in every format.
 */
import t from 'tap';
import { isAppError } from '../../core/errors.js';
import { withWavSizes } from '../../plugins/engine/audio.js';
import { MAX_PART_CHARS, splitSentences } from '../../plugins/engine/sentences.js';
import { OPENAI_VOICES, pickVoice } from '../../plugins/engine/speech.js';
import { SPEECH_FORMATS, startEncoder, tempoFilter } from '../../plugins/engine/speech-encoder.js';
import { voicesOf } from '../../plugins/backend-transformers/head.js';
import { speak } from './signals.js';

t.test('sentences: at their ends, lines apart, spaces collapsed', async (t) => {
  t.same(splitSentences('One two. Three four! Five six? Seven eight.'), ['One two.', 'Three four!', 'Five six?', 'Seven eight.']);
  t.same(splitSentences('He said "stop." Then left…  Really?!'), ['He said "stop."', 'Then left…', 'Really?!']);
  t.same(splitSentences('Pi is 3.14 and e.g. this'), ['Pi is 3.14 and e.g.', 'this'], 'a dot inside a word is no end');
  t.same(splitSentences('first line\n\nsecond   line\n'), ['first line', 'second line']);
  t.same(splitSentences('你好。再见！'), ['你好。', '再见！']);
  t.same(splitSentences('  \n\t '), []);
  t.same(splitSentences('...'), ['...']);
});

t.test('a long sentence is cut at a comma, else a space, else hard', async (t) => {
  const words = Array.from({ length: 120 }, (_, i) => `word${i}`).join(' ');
  const parts = splitSentences(words);
  t.ok(parts.length > 1);
  t.ok(parts.every((p) => p.length <= MAX_PART_CHARS));
  t.equal(parts.join(' '), words, 'no word lost or split');
  const commas = splitSentences(`${'a'.repeat(200)}, ${'b'.repeat(200)}`);
  t.same(commas, [`${'a'.repeat(200)},`, 'b'.repeat(200)]);
  const solid = splitSentences('x'.repeat(700));
  t.same(
    solid.map((p) => p.length),
    [300, 300, 100],
  );
});

t.test('voices: own names, OpenAI names in turn, the first by default, else 400 naming voice', async (t) => {
  t.equal(pickVoice(['a', 'b'], undefined), 'a');
  t.equal(pickVoice(['a', 'b'], 'b'), 'b');
  t.same(
    OPENAI_VOICES.map((v) => pickVoice(['a', 'b', 'c'], v)),
    ['a', 'b', 'c', 'a', 'b', 'c', 'a', 'b', 'c', 'a', 'b', 'c', 'a'],
  );
  t.equal(pickVoice(['default'], 'Nova'), 'default', 'any case');
  const err = (() => {
    try {
      pickVoice(['default'], 'bass');
    } catch (e) {
      return e;
    }
  })();
  t.ok(isAppError(err) && err.statusCode === 400 && err.param === 'voice');
});

t.test('speed: atempo steps within 0.5 to 2', async (t) => {
  t.equal(tempoFilter(1), null);
  t.equal(tempoFilter(1.5), 'atempo=1.5');
  t.equal(tempoFilter(0.25), 'atempo=0.5,atempo=0.5');
  t.equal(tempoFilter(4), 'atempo=2,atempo=2');
  t.equal(tempoFilter(3), 'atempo=2,atempo=1.5');
});

t.test("a VITS config's voices", async (t) => {
  t.same(voicesOf({}), ['default']);
  t.same(voicesOf({ num_speakers: 1 }), ['default']);
  t.same(voicesOf({ num_speakers: 3 }), ['speaker_0', 'speaker_1', 'speaker_2']);
  t.same(voicesOf({ num_speakers: 2, speaker_id_map: { b: 1, a: 0 } }), ['a', 'b'], 'in speaker-id order');
  t.same(voicesOf({ num_speakers: 2, speaker_id_map: { a: 0 } }), ['speaker_0', 'speaker_1'], 'a map that misses a speaker is not used');
});

t.test("a streamed WAV's unknown sizes are filled in; other files untouched", async (t) => {
  const header = Buffer.alloc(44);
  header.write('RIFF', 0, 'latin1');
  header.writeUInt32LE(0xffffffff, 4);
  header.write('WAVEfmt ', 8, 'latin1');
  header.writeUInt32LE(16, 16);
  header.write('data', 36, 'latin1');
  header.writeUInt32LE(0xffffffff, 40);
  const wav = Buffer.concat([header, Buffer.alloc(1000)]);
  const fixed = Buffer.from(withWavSizes(wav));
  t.equal(fixed.readUInt32LE(4), wav.length - 8);
  t.equal(fixed.readUInt32LE(40), 1000);
  t.equal(wav.readUInt32LE(40), 0xffffffff, 'the upload itself is not changed');
  const sized = Buffer.from(fixed);
  sized.writeUInt32LE(5000, 40);
  t.equal(withWavSizes(sized), sized, 'a WAV with real sizes stays as it is (truncated, if it is)');
  const mp3 = Buffer.from('ID3 not a wav');
  t.equal(withWavSizes(mp3), mp3);
  // espeak-ng writing to a pipe puts 0x7FFFF000 where the sizes go.
  const espeak = speak('hello');
  t.equal(espeak.readUInt32LE(40), 0x7ffff000, "espeak-ng's placeholder");
  const whole = Buffer.from(withWavSizes(espeak));
  t.equal(whole.readUInt32LE(4), espeak.length - 8);
  t.equal(whole.readUInt32LE(40), espeak.length - 44);
});

t.test('without ffmpeg: a 503 naming the package, no hang', async (t) => {
  const encoder = startEncoder('mp3', 16000, 1, '/nonexistent/ffmpeg');
  const written = encoder.write(new Float32Array(1600)).then(
    () => null,
    (e: unknown) => e,
  );
  let failure: unknown;
  try {
    for await (const _ of encoder.output) t.fail('no bytes');
  } catch (err) {
    failure = err;
  }
  t.ok(isAppError(failure) && failure.statusCode === 503, String(failure));
  t.match((failure as Error).message, /apt-get install ffmpeg/);
  t.ok(await written, 'the write fails too');
});

t.test('the same samples give the same bytes in every format', async (t) => {
  const samples = new Float32Array(16000).map((_, i) => 0.3 * Math.sin((2 * Math.PI * 440 * i) / 16000));
  for (const format of Object.keys(SPEECH_FORMATS) as (keyof typeof SPEECH_FORMATS)[]) {
    const once = async () => {
      const encoder = startEncoder(format, 16000, 1);
      await encoder.write(samples);
      encoder.end();
      const chunks: Buffer[] = [];
      for await (const c of encoder.output) chunks.push(c);
      return Buffer.concat(chunks);
    };
    const a = await once();
    t.ok(a.length > 0, format);
    t.same(await once(), a, `${format}: the same bytes`);
  }
});
