/**
 * Speaking a message in the web console, in real headless Chromium whose microphone is a WAV file
 * (`--use-fake-device-for-media-stream --use-file-for-fake-audio-capture`, the permission granted
 * by `--use-fake-ui-for-media-stream`): text written as tones (test/audio/signals.ts) that the
 * `tiny-ctc` fixture reads back exactly. With no model of the `transcription` capability there is
 * no Record voice button and the settings say why; with one, the page records (MediaRecorder,
 * webm/opus), posts the recording as multipart to `/v1/audio/transcriptions`, the transcript lands
 * in the message box and Send gets it answered by the fake backend's echo model; with the
 * auto-send setting it is sent at once. A microphone the browser refuses (a second Chromium,
 * `--use-fake-ui-for-media-stream=deny`), and a transcription model deleted behind the page's
 * back (the server's own message shown), are sentences on the page. With the `tiny-vits` fixture
 * created, each answer offers Read aloud and the voice picker lists its voices: a click posts the
 * answer's text, the model and the chosen voice to `/v1/audio/speech` as mp3, the page plays the
 * audio from a `blob:` URL (the button `loading`, then `playing`) and a second click stops it; the
 * bytes the page got, transcribed by tiny-ctc, are the answer again. The speech model deleted
 * behind the page's back: the server's message under the answer, and Read aloud goes. axe and
 * 390 px with the voice controls shown.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Locator } from 'playwright-core';
import t, { type Test } from 'tap';
import { createFakeModel, FAKE_BACKEND } from 'lia/testing';
import { builtFixture } from '../../scripts/fixtures/build.js';
import { encode, RATE, tones } from '../audio/signals.js';
import { createModel } from '../helpers/models.js';
import { axe, launchBrowser, openConsole, overflowsX, startConsole } from './browser.js';

const TEXT = 'HELLO LIA';
// Silence first: the file starts when the microphone opens, a moment before MediaRecorder does
// (longer on a busy machine).
const signal = tones(TEXT, { lead: 1.5 });
const dir = mkdtempSync(path.join(os.tmpdir(), 'lia-webui-mic-'));
const wav = path.join(dir, 'microphone.wav');
writeFileSync(wav, encode(signal.samples, 'wav', { outRate: 48000 }));
/** Whole seconds to record so the file has played out (it plays once: `%noloop`). */
const RECORD_SECONDS = Math.ceil(signal.samples.length / RATE) + 1;
const ctc = await builtFixture('tiny-ctc');
const vits = await builtFixture('tiny-vits');

const c = await startConsole(
  { plugins: { 'backend-llama-cpp': false, 'fake-backend': FAKE_BACKEND } },
  { args: ['--use-fake-ui-for-media-stream', '--use-fake-device-for-media-stream', `--use-file-for-fake-audio-capture=${wav}%noloop`] },
);
t.teardown(async () => {
  await c.close();
  rmSync(dir, { recursive: true, force: true });
});
const { app, page } = c;
await createFakeModel(app, 'parrot', 'parrot says:');
const errors: string[] = [];
page.on('pageerror', (e) => errors.push(e.message));

const prompt = page.getByLabel('Message', { exact: true });
const recordButton = page.getByRole('button', { name: 'Record voice' });
const stopButton = page.getByRole('button', { name: 'Stop recording' });
const messages = page.getByTestId('messages');
const answers = messages.getByRole('article', { name: 'Assistant' });
const newChat = page.getByRole('complementary', { name: 'Conversations' }).locator('button.primary', { hasText: 'New chat' });
const audio = page.getByTestId('read-aloud-audio');

/** What tiny-ctc hears of `text` spoken by tiny-vits: its tokenizer keeps a-z, ' and blanks (lower-casing first), tiny-ctc writes upper case. */
function asHeard(text: string): string {
  return text
    .toUpperCase()
    .replace(/[^A-Z' ]/g, '')
    .replace(/ +/g, ' ')
    .trim();
}

/** Posts `body` to `path` on the appliance as JSON. */
function postJson(path: string, body: unknown) {
  return app.fetch(path, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
}

/** `bytes` of `type` sent as the file `name` to `/v1/audio/transcriptions` with the `ctc` model (tiny-ctc). */
async function transcribed(bytes: Uint8Array<ArrayBuffer>, type: string, name: string) {
  const form = new FormData();
  form.append('file', new Blob([bytes], { type }), name);
  form.append('model', 'ctc:latest');
  const multipart = new Response(form);
  return app.fetch('/v1/audio/transcriptions', {
    method: 'POST',
    headers: { 'content-type': multipart.headers.get('content-type')! },
    body: await multipart.arrayBuffer(),
  });
}

/** Records until the WAV file has played out, then stops. */
async function speak(): Promise<void> {
  await recordButton.click();
  await stopButton.waitFor();
  await page.waitForFunction(
    (n) => {
      const m = /Recording (\d+):(\d\d)/.exec(document.querySelector('[data-testid="dictation-status"]')?.textContent ?? '');
      return m !== null && Number(m[1]) * 60 + Number(m[2]) >= n;
    },
    RECORD_SECONDS,
    { timeout: 30_000 },
  );
  await stopButton.click();
}

/** Waits for `done` or a dictation error, and fails with the error's text when there is one. */
async function withoutError(t: Test, done: Locator): Promise<void> {
  const error = page.getByTestId('dictation-error');
  await done.or(error).first().waitFor({ timeout: 30_000 });
  t.equal(await error.count(), 0, `no dictation error${(await error.count()) ? `: ${await error.textContent()}` : ''}`);
}

t.test('no transcription or speech model: no Record voice, no Read aloud, and the settings say why', async (t) => {
  await c.open('chat');
  await page.getByRole('combobox', { name: 'Model' }).waitFor();
  await prompt.fill('hi');
  await page.getByRole('button', { name: 'Send' }).click();
  await answers.filter({ hasText: 'parrot says: hi' }).waitFor();
  await page.getByRole('button', { name: 'Regenerate' }).waitFor();
  t.equal(await recordButton.count(), 0, 'no Record voice button');
  t.equal(await page.getByRole('button', { name: 'Read aloud' }).count(), 0, 'no Read aloud on the answer');
  await page.getByRole('button', { name: 'Settings' }).click();
  t.match(
    await page.getByTestId('transcription-model-none').textContent(),
    /Transcription model: none installed \(no model has the transcription capability\)/,
  );
  t.match(await page.getByTestId('speech-model-none').textContent(), /Speech model: none installed \(no model has the speech capability\)/);
  await page.getByRole('button', { name: 'Settings' }).click();
});

t.test('spoken into the microphone: the transcript in the message box, sent and answered', async (t) => {
  await createModel(app, 'ctc', ctc);
  await page.reload();
  await recordButton.waitFor();
  await newChat.click();
  await page.getByRole('button', { name: 'Settings' }).click();
  t.equal(await page.getByLabel('Transcription model').inputValue(), 'ctc:latest', 'the installed transcription model is picked');
  t.equal(await page.getByRole('option', { name: 'parrot:latest' }).count(), 1, 'the chat picker offers the chat model');
  t.equal(await page.locator('#model option', { hasText: 'ctc' }).count(), 0, 'the chat picker does not offer the transcription model');
  t.same(await axe(page), [], 'axe: no violations with the voice settings shown');
  await page.getByRole('button', { name: 'Settings' }).click();

  const sent = page.waitForRequest((r) => r.url().endsWith('/v1/audio/transcriptions'));
  await speak();
  const request = await sent;
  // (Chromium does not hand the devtools protocol a body with a file part, so its bytes are not checked here.)
  t.equal(request.method(), 'POST');
  t.match(request.headers()['content-type'], /^multipart\/form-data; boundary=/, 'sent as multipart');
  await withoutError(t, page.locator('#prompt:not(:placeholder-shown)'));
  t.equal(await prompt.inputValue(), TEXT, 'the transcript is in the message box, not yet sent');
  t.equal(await messages.getByRole('article').count(), 0, 'nothing sent before Send');
  await page.getByRole('button', { name: 'Settings' }).click();
  await c.shot('chat-voice');
  await page.getByRole('button', { name: 'Settings' }).click();

  await page.getByRole('button', { name: 'Send' }).click();
  await answers.filter({ hasText: `parrot says: ${TEXT}` }).waitFor();
  t.equal(await messages.locator('.user-text').textContent(), TEXT, 'the spoken text is the message sent');
});

t.test('with "send at once": the transcript is sent without Send', async (t) => {
  await newChat.click();
  await page.getByRole('button', { name: 'Settings' }).click();
  await page.getByLabel('Send the transcribed text at once').check();
  await page.getByRole('button', { name: 'Settings' }).click();
  await speak();
  await withoutError(t, messages.locator('.user-text'));
  t.equal(await messages.locator('.user-text').textContent(), TEXT, 'sent as spoken');
  await answers.filter({ hasText: `parrot says: ${TEXT}` }).waitFor();
  t.equal(await prompt.inputValue(), '', 'the message box stays empty');

  await page.reload();
  await page.getByRole('button', { name: 'Settings' }).click();
  t.ok(await page.getByLabel('Send the transcribed text at once').isChecked(), 'the setting is kept in this browser');
  await page.getByLabel('Send the transcribed text at once').uncheck();
  await page.getByRole('button', { name: 'Settings' }).click();
});

t.test('at 390 px the composer with Record voice does not scroll sideways', async (t) => {
  await page.setViewportSize({ width: 390, height: 844 });
  await page.reload();
  await recordButton.waitFor();
  t.notOk(await overflowsX(page), 'no horizontal scroll at 390 px');
  await page.setViewportSize({ width: 1200, height: 800 });
});

t.test('a microphone the browser refuses: a sentence saying how to allow it', async (t) => {
  // A browser of its own: the permission is Chromium's switch, refusing every request for a microphone.
  const refusing = await launchBrowser(app, ['--use-fake-ui-for-media-stream=deny', '--use-fake-device-for-media-stream']);
  t.teardown(() => refusing.close());
  const other = await refusing.newPage();
  await openConsole(other, app);
  await other.getByRole('button', { name: 'Record voice' }).click();
  const error = other.getByTestId('dictation-error');
  await error.waitFor();
  t.equal(
    await error.textContent(),
    'The browser did not let this page use the microphone. Allow the microphone for this site (in the address bar or the site settings) and try again.',
  );
  t.equal(await other.getByRole('button', { name: 'Stop recording' }).count(), 0, 'not recording');
  t.equal(await other.getByRole('button', { name: 'Record voice' }).isEnabled(), true, 'Record voice can be tried again');
});

const SPOKEN = 'read this answer out loud, please';

t.test('read aloud: the answer posted with the model and the chosen voice, played, and stopped by a second click', async (t) => {
  await createModel(app, 'vits', vits);
  // Keeps every blob: URL the page makes with its blob, so the test can read the audio the page
  // plays. (Chromium's devtools hold no body for a response read as a blob: Playwright's
  // response.body() is empty for it.)
  await page.addInitScript(() => {
    const made: { url: string; blob: Blob }[] = [];
    (window as unknown as { made: typeof made }).made = made;
    const create = URL.createObjectURL.bind(URL);
    URL.createObjectURL = (obj: Blob | MediaSource) => {
      const url = create(obj);
      if (obj instanceof Blob) made.push({ url, blob: obj });
      return url;
    };
  });
  await page.reload();
  await newChat.click();
  await page.getByRole('button', { name: 'Settings' }).click();
  t.equal(await page.getByLabel('Speech model').inputValue(), 'vits:latest', 'the installed speech model is picked');
  t.same(await page.locator('#voice option').allTextContents(), ['loud', 'quiet'], "the voice picker lists the model's voices from /api/show");
  t.equal(await page.locator('#voice').inputValue(), 'loud', 'the first voice until the user picks');
  t.equal(await page.locator('#model option', { hasText: 'vits' }).count(), 0, 'the chat picker does not offer the speech model');
  t.same(await axe(page), [], 'axe: no violations with the speech model and its voices shown');
  await page.locator('#voice').selectOption('quiet');
  await page.getByRole('button', { name: 'Settings' }).click();

  await prompt.fill(SPOKEN);
  await page.getByRole('button', { name: 'Send' }).click();
  const text = `parrot says: ${SPOKEN}`;
  const answer = answers.filter({ hasText: text });
  const readButton = answer.getByRole('button', { name: 'Read aloud' });
  await readButton.waitFor();
  // The button's data-state and the audio element's events, as they change (a short state is not missed).
  await page.evaluate(() => {
    const seen = { states: [] as string[], events: [] as string[] };
    (window as unknown as { seen: typeof seen }).seen = seen;
    new MutationObserver((changes) => {
      for (const c of changes) seen.states.push((c.target as Element).getAttribute('data-state') ?? '');
    }).observe(document.querySelector('[data-testid="messages"]')!, { subtree: true, attributes: true, attributeFilter: ['data-state'] });
    const player = document.querySelector('[data-testid="read-aloud-audio"]')!;
    for (const name of ['playing', 'pause', 'ended', 'error']) player.addEventListener(name, () => seen.events.push(name));
  });
  const seen = () => page.evaluate(() => (window as unknown as { seen: { states: string[]; events: string[] } }).seen);
  t.equal(await readButton.getAttribute('data-state'), 'idle', 'idle before the click');

  const spoken = page.waitForResponse((r) => r.url().endsWith('/v1/audio/speech'));
  await readButton.click();
  const response = await spoken;
  t.equal(response.request().method(), 'POST', 'a POST to /v1/audio/speech');
  t.same(
    response.request().postDataJSON(),
    { model: 'vits:latest', input: text, voice: 'quiet', response_format: 'mp3' },
    "the answer's text, the model and the chosen voice, as mp3",
  );
  t.equal(response.status(), 200, 'answered 200');
  t.equal(response.headers()['content-type'], 'audio/mpeg', 'with mp3');

  const stopButton = answer.getByRole('button', { name: 'Stop reading' });
  await answer.locator('button[data-state="playing"]').waitFor({ timeout: 30_000 });
  t.equal(
    await answer.getByRole('alert').count(),
    0,
    `no read-aloud error${(await answer.getByRole('alert').count()) ? `: ${await answer.getByRole('alert').textContent()}` : ''}`,
  );
  const playing = await audio.evaluate((a: HTMLAudioElement) => ({ src: a.src, paused: a.paused, ended: a.ended }));
  t.match(playing.src, /^blob:https:\/\//, 'the audio plays from a blob: URL');
  // The bytes behind that URL: what the page got from /v1/audio/speech and plays.
  const got = await page.evaluate(async (src) => {
    const blob = (window as unknown as { made: { url: string; blob: Blob }[] }).made.find((m) => m.url === src)?.blob;
    return blob ? { type: blob.type, bytes: [...new Uint8Array(await blob.arrayBuffer())] } : null;
  }, playing.src);
  t.ok(got, 'the page made that URL from a blob');
  t.equal(got?.type, 'audio/mpeg', 'the blob is the mp3 the appliance answered');
  t.ok(!playing.paused || playing.ended, 'the audio is playing (or has ended)');
  t.same((await seen()).states, ['loading', 'playing'], 'the button went loading, then playing');
  t.ok((await seen()).events.includes('playing') || playing.ended, 'the element fired playing');

  await stopButton.click();
  await answer.locator('button[data-state="idle"]').waitFor();
  t.equal(await readButton.count(), 1, 'the button reads Read aloud again');
  t.equal(await audio.evaluate((a: HTMLAudioElement) => a.paused), true, 'the audio is paused');
  t.same((await seen()).states, ['loading', 'playing', 'idle'], 'then idle');
  t.notOk((await seen()).events.includes('error'), 'no media error');
  t.equal(await answer.getByRole('alert').count(), 0, 'no error under the answer');

  // The audio the page played is the answer spoken: tiny-ctc reads it back.
  const bytes = new Uint8Array(got?.bytes ?? []);
  const direct = await postJson('/v1/audio/speech', { model: 'vits:latest', input: text, voice: 'quiet', response_format: 'mp3' });
  t.same(Buffer.from(bytes), Buffer.from(await direct.arrayBuffer()), 'the same bytes the appliance answers that request with');
  const heard = await transcribed(bytes, 'audio/mpeg', 'speech.mp3');
  t.equal(heard.status, 200, `transcribed${heard.status === 200 ? '' : `: ${await heard.clone().text()}`}`);
  t.equal(((await heard.json()) as { text: string }).text, asHeard(text), 'tiny-ctc hears the answer in the bytes the page got');
});

t.test('the speech model deleted behind the page: the server says so under the answer, and Read aloud goes', async (t) => {
  await page.reload();
  const answer = answers.filter({ hasText: `parrot says: ${SPOKEN}` });
  const readButton = answer.getByRole('button', { name: 'Read aloud' });
  await readButton.waitFor();
  const del = await app.fetch('/api/delete', { method: 'DELETE', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: 'vits' }) });
  t.equal(del.status, 200);
  // What the server answers a speech request with a model it does not have.
  const direct = await postJson('/v1/audio/speech', { model: 'vits:latest', input: SPOKEN, voice: 'quiet', response_format: 'mp3' });
  t.equal(direct.status, 404);
  const { error: serverError } = (await direct.json()) as { error: { message: string } };

  await readButton.click();
  const error = answer.getByRole('alert');
  await error.waitFor({ timeout: 30_000 });
  t.equal(await error.textContent(), `Could not read this answer aloud: ${serverError.message}`, "the server's message");
  await readButton.waitFor({ state: 'detached' });
  t.equal(await answer.getByRole('button', { name: 'Stop reading' }).count(), 0, 'not reading');
  t.equal(await audio.evaluate((a: HTMLAudioElement) => a.paused), true, 'nothing plays');
  t.equal(await error.textContent(), `Could not read this answer aloud: ${serverError.message}`, 'the message stays once the button is gone');
  await page.getByRole('button', { name: 'Settings' }).click();
  t.match(await page.getByTestId('speech-model-none').textContent(), /Speech model: none installed/, 'the settings say no speech model is left');
  await page.getByRole('button', { name: 'Settings' }).click();
});

t.test('the transcription model deleted behind the page: the server says so on the page, and the button goes', async (t) => {
  await page.reload();
  await recordButton.waitFor();
  const del = await app.fetch('/api/delete', { method: 'DELETE', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: 'ctc' }) });
  t.equal(del.status, 200);
  // What the server answers a transcription with a model it does not have.
  const direct = await transcribed(new Uint8Array(encode(signal.samples, 'wav')), 'audio/wav', 'speech.wav');
  t.equal(direct.status, 404);
  const { error: serverError } = (await direct.json()) as { error: { message: string } };

  await speak();
  const error = page.getByTestId('dictation-error');
  await error.waitFor({ timeout: 30_000 });
  t.equal(await error.textContent(), `The transcription failed: ${serverError.message}`, "the server's message");
  await recordButton.waitFor({ state: 'detached' });
  t.equal(await prompt.inputValue(), '', 'nothing put in the message box');
  t.same(errors, [], 'no script errors in the page');
});
