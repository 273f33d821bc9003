/**
 * The pieces of the image path that need no model: the one check every surface's images pass
 * (`checkImage`, `imageFromDataUrl`), and the OpenAI wire codec carrying images as `image_url`
 * data URLs (what llama-server and OpenAI-compatible upstreams read).
 */
import t from 'tap';
import { isAppError } from '../../core/errors.js';
import { openaiWire } from 'lia/openai-wire';
import { imageFromDataUrl, imageMimeType } from 'lia/utils';
import { checkImage } from '../../plugins/engine/image-check.js';
import { imageHeader, solidPng } from './images.js';

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
  t.same(checkImage(png, 1 << 20), { mime: 'image/png', bytes: solidPng(4, 4).length, width: 4, height: 4 });
  const b64 = (format: Parameters<typeof imageHeader>[0], w: number, h: number) => imageHeader(format, w, h).toString('base64');
  t.match(checkImage(b64('jpeg', 640, 480), 100), { mime: 'image/jpeg', width: 640, height: 480 });
  t.match(checkImage(b64('gif', 320, 200), 100), { mime: 'image/gif', width: 320, height: 200 });
  t.match(checkImage(b64('webp', 1024, 768), 100), { mime: 'image/webp', width: 1024, height: 768 });
  t.match(checkImage(b64('bmp', 800, 600), 100), { mime: 'image/bmp', width: 800, height: 600 });
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

t.test('image bombs: refused by the size their header declares, before anything decodes them', async (t) => {
  const bomb = imageHeader('bmp', 26_000, 26_000).toString('base64');
  t.equal(bomb.length, 72, 'a 54-byte BMP header, 72 base64 characters');
  t.match(
    refusal(() => checkImage(bomb, 1 << 20)),
    { status: 400, message: 'an image of 26000 × 26000 pixels is over the limit of 8192 pixels a side and 25 megapixels' },
  );
  t.match(
    refusal(() => checkImage(imageHeader('png', 8000, 8000).toString('base64'), 1 << 20)),
    { status: 400, message: /8000 × 8000 pixels is over/ },
  );
  t.match(
    refusal(() => checkImage(imageHeader('jpeg', 9000, 100).toString('base64'), 1 << 20)),
    { status: 400, message: /9000 × 100 pixels/ },
  );
  t.match(
    refusal(() => checkImage(imageHeader('webp', 16_000, 16_000).toString('base64'), 1 << 20)),
    { status: 400, message: /16000 × 16000/ },
  );
  t.match(
    refusal(() => checkImage(imageHeader('gif', 65_535, 65_535).toString('base64'), 1 << 20)),
    { status: 400, message: /65535 × 65535/ },
  );
  t.match(checkImage(imageHeader('jpeg', 4032, 3024).toString('base64'), 1 << 20), { width: 4032, height: 3024 }, "a 12 MP phone photo's size is fine");
  t.match(
    refusal(() => checkImage(Buffer.from('BM\0\0').toString('base64'), 100)),
    { status: 400, message: /BMP header gives no size/ },
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
