import { existsSync } from 'node:fs';
import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { TITLE_ANNOTATION } from '../../plugins/model-store/store/manifest.js';
import { materialiseFolder, relativePathProblem } from '../../plugins/model-store/store/layout.js';
import { ONNX_MEDIA_TYPE } from '../../plugins/backend-transformers/format.js';

t.test('file names of model folders are checked', async (t) => {
  for (const ok of ['config.json', 'onnx/model.onnx', 'onnx/model_quantized.onnx', 'tokenizer_config.json', '1_Pooling/config.json']) {
    t.equal(relativePathProblem(ok), null, ok);
  }
  for (const bad of ['', '../x', 'a/../../x', '/etc/passwd', 'a//b', '.hidden', 'onnx/', 'a\\b', 'x\u0000', 'ü.json', 'a/b/c/d/e/f/g/h/i']) {
    t.not(relativePathProblem(bad), null, JSON.stringify(bad));
  }
});

t.test('a manifest from a registry cannot place files outside the model folder', async (t) => {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'lia-onnx-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const blob = path.join(dir, 'blob');
  await writeFile(blob, 'payload');
  const layer = (title: string) => ({ mediaType: ONNX_MEDIA_TYPE, digest: 'sha256:' + '1'.repeat(64), size: 7, annotations: { [TITLE_ANNOTATION]: title } });
  const target = path.join(dir, 'models', 'onnx', 'abc');
  await materialiseFolder(target, [layer('config.json'), layer('../../escaped.txt'), layer('/tmp/abs.txt'), layer('onnx/model.onnx')], () => blob);
  t.equal(await readFile(path.join(target, 'config.json'), 'utf8'), 'payload');
  t.equal(await readFile(path.join(target, 'onnx', 'model.onnx'), 'utf8'), 'payload');
  t.notOk(existsSync(path.join(dir, 'models', 'escaped.txt')));
  t.same((await readdir(target)).sort(), ['config.json', 'onnx']);
  t.same(await readdir(path.join(dir, 'models', 'onnx')), ['abc'], 'no temp folder left');
});
