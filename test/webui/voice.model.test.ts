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
 * back (the server's own message shown), are sentences on the page. No model has `speech`, so no answer offers Read aloud. axe and 390 px with the voice
 * controls shown.
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

t.test('the transcription model deleted behind the page: the server says so on the page, and the button goes', async (t) => {
  await page.reload();
  await recordButton.waitFor();
  const del = await app.fetch('/api/delete', { method: 'DELETE', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: 'ctc' }) });
  t.equal(del.status, 200);
  // What the server answers a transcription with a model it does not have.
  const form = new FormData();
  form.append('file', new Blob([new Uint8Array(encode(signal.samples, 'wav'))], { type: 'audio/wav' }), 'speech.wav');
  form.append('model', 'ctc:latest');
  const multipart = new Response(form);
  const direct = await app.fetch('/v1/audio/transcriptions', {
    method: 'POST',
    headers: { 'content-type': multipart.headers.get('content-type')! },
    body: await multipart.arrayBuffer(),
  });
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
