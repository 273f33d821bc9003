/**
 * The pieces of the image path that need no model: the one check every surface's images pass
 * (`checkImage`, `imageFromDataUrl`), and the OpenAI wire codec carrying images as `image_url`
 * data URLs (what llama-server and OpenAI-compatible upstreams read).
 */
import t from 'tap';
import { isAppError } from '../../core/errors.js';
import { checkImage, imageFromDataUrl, imageMimeType } from '../../core/wire/images.js';
import { openaiWire } from '../../core/wire/openai.js';
import { solidPng } from './images.js';

const png = solidPng(4, 4).toString('base64');

function refusal(fn: () => unknown): { status: number; message: string; param?: string } {
  try {
    fn();
  } catch (err) {
    if (!isAppError(err)) throw err;
    return { status: err.statusCode, message: err.message, ...(err.param ? { param: err.param } : {}) };
  }
  throw new Error('no error');
}

t.test('checkImage takes PNG, JPEG, GIF, WebP and BMP by their first bytes', async (t) => {
  t.same(checkImage(png, 1 << 20), { mime: 'image/png', bytes: solidPng(4, 4).length });
  t.equal(checkImage(Buffer.from([0xff, 0xd8, 0xff, 0xe0, 0, 0x10]).toString('base64'), 100).mime, 'image/jpeg');
  t.equal(checkImage(Buffer.from('GIF89a....').toString('base64'), 100).mime, 'image/gif');
  t.equal(checkImage(Buffer.from('RIFF\0\0\0\0WEBPVP8 ').toString('base64'), 100).mime, 'image/webp');
  t.equal(checkImage(Buffer.from('BM\0\0\0\0').toString('base64'), 100).mime, 'image/bmp');
  t.equal(checkImage(`${png.slice(0, 20)}\n${png.slice(20)}`, 1 << 20).mime, 'image/png', 'line breaks inside are ignored');
  t.equal(imageMimeType(png), 'image/png');
});

t.test('checkImage refuses with a 400 naming the field', async (t) => {
  t.match(
    refusal(() => checkImage('', 100, 'images')),
    { status: 400, message: /empty/, param: 'images' },
  );
  t.match(
    refusal(() => checkImage('%%%%', 100)),
    { status: 400, message: /not valid base64/ },
  );
  t.match(
    refusal(() => checkImage(Buffer.from('hello world').toString('base64'), 100)),
    { status: 400, message: /not a PNG, JPEG, GIF, WebP or BMP/ },
  );
  t.match(
    refusal(() => checkImage(png, 10)),
    { status: 400, message: /limit is 10/ },
  );
});

t.test('imageFromDataUrl: the payload of a base64 data URL; an http(s) URL left for the engine', async (t) => {
  t.equal(imageFromDataUrl(`data:image/png;base64,${png}`, 'p'), png);
  t.equal(imageFromDataUrl(`data:;base64,${png}`, 'p'), png, 'a missing type is fine: the bytes say it');
  t.equal(imageFromDataUrl('https://example.com/cat.png', 'u'), 'https://example.com/cat.png', 'fetched (or refused) by the engine, per remoteImages');
  t.match(
    refusal(() => imageFromDataUrl('data:image/png,rawbytes', 'u')),
    { status: 400, message: /base64/ },
  );
  t.match(
    refusal(() => imageFromDataUrl('file:///etc/passwd', 'u')),
    { status: 400, message: /data: URL/ },
  );
});

t.test('the wire codec sends images as image_url data URLs in the user turn', async (t) => {
  const chat = openaiWire.chat('m', { messages: [{ role: 'user', content: 'what is it?', images: [png] }], options: {} });
  t.same((chat.body['messages'] as unknown[])[0], {
    role: 'user',
    content: [
      { type: 'text', text: 'what is it?' },
      { type: 'image_url', image_url: { url: `data:image/png;base64,${png}` } },
    ],
  });
  const gen = openaiWire.generate('m', { prompt: 'describe', images: [png], raw: false, options: {} });
  t.equal(gen.path, '/v1/chat/completions');
  t.match((gen.body['messages'] as unknown[])[0], { role: 'user', content: [{ type: 'text' }, { type: 'image_url' }] });
  t.match(
    refusal(() => openaiWire.generate('m', { prompt: 'x', images: [png], raw: true, options: {} })),
    { status: 400, param: 'images' },
  );
  const plain = openaiWire.chat('m', { messages: [{ role: 'user', content: 'hi' }], options: {} });
  t.same((plain.body['messages'] as unknown[])[0], { role: 'user', content: 'hi' }, 'text alone stays a string');
});
