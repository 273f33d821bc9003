/**
 * Model commands, all through the appliance's HTTPS API as Ollama's CLI does: `lia pull` and
 * `lia push` (a progress bar per layer with speed and time left), `lia list`, `lia show`,
 * `lia cp`, `lia rm` and `lia create NAME -f Modelfile` (local files are uploaded as blobs first).
 *
 * @module
 */
import { createReadStream } from 'node:fs';
import { readdir, readFile, stat } from 'node:fs/promises';
import { createHash } from 'node:crypto';
import os from 'node:os';
import path from 'node:path';
import { ProgressView, type ProgressLine } from './progress-view.js';
import { ModelfileError, parseModelfile } from '../modelfile/parse.js';
import { CliError, type ApiClient, type CliCommand, type CliIO } from 'lia/plugin';
import { formatBytes, responseError, table } from 'lia/utils';

interface TagsResponse {
  models: Array<{ name: string; digest: string; size: number; modified_at: string }>;
}

/** "3 minutes ago", as `ollama list` prints it. */
function ago(iso: string, now = Date.now()): string {
  const secs = Math.max(0, Math.round((now - Date.parse(iso)) / 1000));
  const units: Array<[number, string]> = [
    [86400 * 365, 'year'],
    [86400 * 30, 'month'],
    [86400 * 7, 'week'],
    [86400, 'day'],
    [3600, 'hour'],
    [60, 'minute'],
    [1, 'second'],
  ];
  if (secs < 1) return 'Less than a second ago';
  for (const [size, unit] of units) {
    if (secs >= size) {
      const n = Math.floor(secs / size);
      return n === 1 ? `${unit === 'hour' ? 'An' : 'A'} ${unit} ago` : `${n} ${unit}s ago`;
    }
  }
  return 'just now';
}

/** Runs a pull/push/create stream through a progress view. */
async function follow(io: CliIO, verb: string, lines: AsyncGenerator<ProgressLine>): Promise<void> {
  const view = new ProgressView(io.stderr, verb);
  try {
    for await (const p of lines) view.update(p);
  } finally {
    view.done();
  }
}

/** `sha256:<hex>` of a file. */
async function digestOf(file: string): Promise<string> {
  const hash = createHash('sha256');
  for await (const chunk of createReadStream(file, { highWaterMark: 1 << 20 })) hash.update(chunk as Buffer);
  return `sha256:${hash.digest('hex')}`;
}

/** Uploads a file as a blob unless the appliance has it. */
async function uploadBlob(client: ApiClient, file: string, io: CliIO): Promise<string> {
  const digest = await digestOf(file);
  const head = await client.request('HEAD', `/api/blobs/${digest}`);
  if (head.status === 200) return digest;
  const size = (await stat(file)).size;
  io.stderr.write(`uploading ${path.basename(file)} (${formatBytes(size)})\n`);
  const res = await client.request('POST', `/api/blobs/${digest}`, createReadStream(file, { highWaterMark: 1 << 20 }), {
    headers: { 'content-type': 'application/octet-stream' },
  });
  if (res.status !== 201 && res.status !== 200) throw await responseError(res);
  await res.arrayBuffer();
  return digest;
}

/** Every file under `dir` as forward-slash relative paths (hidden files skipped). */
async function filesUnder(dir: string, prefix = ''): Promise<string[]> {
  const out: string[] = [];
  for (const e of await readdir(path.join(dir, prefix), { withFileTypes: true })) {
    if (e.name.startsWith('.')) continue;
    const rel = prefix ? `${prefix}/${e.name}` : e.name;
    if (e.isDirectory()) out.push(...(await filesUnder(dir, rel)));
    else if (e.isFile()) out.push(rel);
  }
  return out;
}

/** A FROM value that names a local path (not a model): starts with ./ ../ / ~ or exists. */
async function localPath(from: string, baseDir: string): Promise<string | null> {
  const expanded = from.startsWith('~/') ? path.join(os.homedir(), from.slice(2)) : from;
  const candidate = path.resolve(baseDir, expanded);
  if (/^(\.{1,2}\/|\/|~\/)/.test(from)) return candidate;
  return (await stat(candidate).then(
    () => true,
    () => false,
  ))
    ? candidate
    : null;
}

function one(args: { positionals: string[] }, what: string, usage: string): string {
  const v = args.positionals[0];
  if (!v) throw new CliError(`missing ${what}\nUsage: ${usage}`, 2);
  return v;
}

/** pull, push, list, show, cp, rm, create. */
export const commands: CliCommand[] = [
  {
    name: 'pull',
    summary: 'Download a model from a registry (progress per layer)',
    usage: 'lia pull NAME [--insecure]',
    options: { insecure: { type: 'boolean' } },
    async run(args, io) {
      const name = one(args, 'model name', this.usage);
      const client = await io.client();
      await follow(io, 'pulling', client.stream<ProgressLine>('POST', '/api/pull', { model: name, insecure: args.values['insecure'] === true }));
      return 0;
    },
  },
  {
    name: 'push',
    summary: 'Upload a model to a registry (name it host/namespace/model:tag first with "lia cp")',
    usage: 'lia push NAME [--insecure]',
    options: { insecure: { type: 'boolean' } },
    async run(args, io) {
      const name = one(args, 'model name', this.usage);
      const client = await io.client();
      await follow(io, 'pushing', client.stream<ProgressLine>('POST', '/api/push', { model: name, insecure: args.values['insecure'] === true }));
      return 0;
    },
  },
  {
    name: 'list',
    summary: 'List the models in the store',
    usage: 'lia list',
    async run(_args, io) {
      const client = await io.client();
      const { models } = await client.json<TagsResponse>('GET', '/api/tags');
      const rows = [['NAME', 'ID', 'SIZE', 'MODIFIED']];
      for (const m of models) rows.push([m.name, m.digest.slice(0, 12), formatBytes(m.size), ago(m.modified_at)]);
      io.stdout.write(table(rows));
      return 0;
    },
  },
  {
    name: 'show',
    summary: "Show a model's details, or one part of it with a flag",
    usage: 'lia show NAME [--modelfile | --parameters | --template | --system | --license]',
    options: {
      modelfile: { type: 'boolean' },
      parameters: { type: 'boolean' },
      template: { type: 'boolean' },
      system: { type: 'boolean' },
      license: { type: 'boolean' },
    },
    async run(args, io) {
      const name = one(args, 'model name', this.usage);
      const client = await io.client();
      const info = await client.json<{
        modelfile: string;
        parameters?: string;
        template?: string;
        system?: string;
        license?: string;
        details: { family: string; parameter_size: string; quantization_level: string; format: string };
        model_info: Record<string, unknown>;
        capabilities?: string[];
      }>('POST', '/api/show', { model: name });
      for (const part of ['modelfile', 'parameters', 'template', 'system', 'license'] as const) {
        if (args.values[part]) {
          io.stdout.write(`${info[part] ?? ''}\n`);
          return 0;
        }
      }
      const archName = info.model_info['general.architecture'];
      const arch = typeof archName === 'string' ? archName : info.details.family;
      const section = (title: string, rows: string[][]): string =>
        rows.length === 0
          ? ''
          : `  ${title}\n` +
            table(rows)
              .split('\n')
              .filter(Boolean)
              .map((l) => `    ${l}`)
              .join('\n') +
            '\n\n';
      const model: string[][] = [
        ['architecture', arch],
        ['format', info.details.format],
        ['parameters', info.details.parameter_size],
      ];
      const ctx = info.model_info[`${arch}.context_length`];
      const emb = info.model_info[`${arch}.embedding_length`];
      if (typeof ctx === 'number') model.push(['context length', String(ctx)]);
      if (typeof emb === 'number') model.push(['embedding length', String(emb)]);
      model.push(['quantization', info.details.quantization_level]);
      let out =
        '\n' +
        section(
          'Model',
          model.filter((r) => r[1]),
        );
      out += section(
        'Capabilities',
        (info.capabilities ?? []).map((c) => [c]),
      );
      if (info.parameters)
        out += section(
          'Parameters',
          info.parameters.split('\n').map((l) =>
            l
              .trim()
              .split(/\s+(.*)/s)
              .slice(0, 2),
          ),
        );
      if (info.system)
        out += section(
          'System',
          info.system
            .split('\n')
            .slice(0, 5)
            .map((l) => [l]),
        );
      if (info.license)
        out += section(
          'License',
          info.license
            .split('\n')
            .slice(0, 2)
            .map((l) => [l]),
        );
      io.stdout.write(out);
      return 0;
    },
  },
  {
    name: 'cp',
    summary: 'Copy a model (a new name for the same blobs)',
    usage: 'lia cp SOURCE DESTINATION',
    async run(args, io) {
      const [source, destination] = args.positionals;
      if (!source || !destination) throw new CliError(`need a source and a destination\nUsage: ${this.usage}`, 2);
      const client = await io.client();
      await client.json('POST', '/api/copy', { source, destination });
      io.stdout.write(`copied '${source}' to '${destination}'\n`);
      return 0;
    },
  },
  {
    name: 'rm',
    summary: 'Delete models (blobs no other model uses are removed)',
    usage: 'lia rm NAME [NAME...]',
    async run(args, io) {
      if (args.positionals.length === 0) throw new CliError(`missing model name\nUsage: ${this.usage}`, 2);
      const client = await io.client();
      for (const name of args.positionals) {
        await client.json('DELETE', '/api/delete', { model: name });
        io.stdout.write(`deleted '${name}'\n`);
      }
      return 0;
    },
  },
  {
    name: 'create',
    summary: 'Create a model from a Modelfile (FROM a .gguf file, an ONNX folder or a model)',
    usage: 'lia create NAME [-f Modelfile]',
    options: { file: { type: 'string', short: 'f' } },
    async run(args, io) {
      const name = one(args, 'model name', this.usage);
      const file = path.resolve((args.values['file'] as string | undefined) ?? 'Modelfile');
      const text = await readFile(file, 'utf8').catch(() => {
        throw new CliError(`cannot read the Modelfile ${file}`);
      });
      let modelfile;
      try {
        modelfile = parseModelfile(text);
      } catch (err) {
        if (err instanceof ModelfileError) throw new CliError(`${file}: ${err.message}`);
        throw err;
      }
      const client = await io.client();
      const { from, license, extraFrom, adapters, draft, ...rest } = modelfile;
      const request: Record<string, unknown> = { model: name, ...rest };
      if (Object.keys(rest.parameters).length === 0) delete request['parameters'];
      if (rest.messages.length === 0) delete request['messages'];
      if (license.length > 0) request['license'] = license;
      const local = await localPath(from, path.dirname(file));
      if (local) {
        const info = await stat(local).catch(() => {
          throw new CliError(`FROM ${from}: no such file or folder (${local})`);
        });
        const files: Record<string, string> = {};
        if (info.isDirectory()) {
          const all = await filesUnder(local);
          const ggufs = all.filter((f) => f.endsWith('.gguf'));
          const chosen = ggufs.length === 1 ? ggufs : all;
          for (const rel of chosen) files[ggufs.length === 1 ? path.basename(rel) : rel] = await uploadBlob(client, path.join(local, rel), io);
        } else {
          files[path.basename(local)] = await uploadBlob(client, local, io);
        }
        // More FROM lines: files that go with the weights (a vision projector).
        for (const extra of extraFrom) {
          const more = await localPath(extra, path.dirname(file));
          if (
            !more ||
            !(await stat(more).then(
              (s) => s.isFile(),
              () => false,
            ))
          )
            throw new CliError(`FROM ${extra}: a second FROM must name a file (a vision projector .gguf)`);
          if (files[path.basename(more)] !== undefined) throw new CliError(`FROM ${extra}: two FROM files have the name ${path.basename(more)}`);
          files[path.basename(more)] = await uploadBlob(client, more, io);
        }
        request['files'] = files;
      } else {
        if (extraFrom.length > 0) throw new CliError(`FROM ${extraFrom[0]}: a second FROM goes with a first FROM that names a file, not a model`);
        request['from'] = from;
      }
      // ADAPTER lines: GGUF LoRA files, uploaded like the weights.
      if (adapters.length > 0) {
        const uploaded: Record<string, string> = {};
        for (const adapter of adapters) {
          const local = await localPath(adapter, path.dirname(file));
          const isFile = local
            ? await stat(local).then(
                (s) => s.isFile(),
                () => false,
              )
            : false;
          if (!local || !isFile) throw new CliError(`ADAPTER ${adapter}: an adapter must name a file (a GGUF LoRA adapter)`);
          if (uploaded[path.basename(local)] !== undefined) throw new CliError(`ADAPTER ${adapter}: two adapters have the name ${path.basename(local)}`);
          uploaded[path.basename(local)] = await uploadBlob(client, local, io);
        }
        request['adapters'] = uploaded;
      }
      // DRAFT: a model's name, or a GGUF file created first as a model of its own (NAME-draft).
      if (draft !== undefined) {
        const local = await localPath(draft, path.dirname(file));
        let draftModel = draft;
        if (local) {
          const isFile = await stat(local).then(
            (s) => s.isFile(),
            () => false,
          );
          if (!isFile) throw new CliError(`DRAFT ${draft}: no such file (${local})`);
          draftModel = `${name.replace(/:[^/:]*$/, '')}-draft`;
          const files = { [path.basename(local)]: await uploadBlob(client, local, io) };
          await follow(io, 'using', client.stream<ProgressLine>('POST', '/api/create', { model: draftModel, files }));
        }
        request['parameters'] = { ...rest.parameters, draft_model: draftModel };
      }
      await follow(io, 'using', client.stream<ProgressLine>('POST', '/api/create', request));
      return 0;
    },
  },
];
