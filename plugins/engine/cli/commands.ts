/**
 * Inference commands, through the appliance's HTTPS API as Ollama's CLI does:
 *
 * - `lia run MODEL [PROMPT]`: with a prompt (or text piped on stdin) it prints one streamed answer;
 *   in a terminal (or with `--interactive`) it opens a chat: `>>> ` prompts, answers stream as they
 *   are generated, Ctrl+C stops an answer, `/bye` or Ctrl+D leaves, `/clear` forgets the
 *   conversation, `/set system TEXT` sets a system message, `"""` starts and ends multi-line input;
 * - `lia ps`: the loaded models (`/api/ps`);
 * - `lia stop MODEL`: unloads a model now (`keep_alive: 0`).
 *
 * @module
 */
import { createInterface } from 'node:readline';
import { CliError, type ApiClient, type CliArgs, type CliCommand, type CliIO } from 'lia/plugin';
import { formatBytes, table } from 'lia/utils';

interface ChatChunk {
  message?: { content?: string };
  done?: boolean;
  total_duration?: number;
  load_duration?: number;
  prompt_eval_count?: number;
  prompt_eval_duration?: number;
  eval_count?: number;
  eval_duration?: number;
}

interface PsModel {
  name: string;
  digest: string;
  size: number;
  size_vram: number;
  expires_at: string;
  context_length: number;
  /** Where it runs: `cpu`, or the GPU device (`Vulkan0`, `CUDA0`, `vulkan` on node-llama-cpp). */
  device?: string;
  /** Its slots, the requests running on them and the requests waiting for one. */
  parallel?: number;
  running?: number;
  queued?: number;
}

type Message = { role: 'system' | 'user' | 'assistant'; content: string };

function modelArg(args: CliArgs, usage: string): string {
  const name = args.positionals[0];
  if (!name) throw new CliError(`a model name is required\nUsage: ${usage}`, 2);
  return name;
}

/** `100% CPU`, `100% GPU` or `48%/52% CPU/GPU`. */
function processor(m: PsModel): string {
  if (m.size_vram <= 0 || m.size <= 0) return '100% CPU';
  if (m.size_vram >= m.size) return '100% GPU';
  const gpu = Math.round((m.size_vram / m.size) * 100);
  return `${100 - gpu}%/${gpu}% CPU/GPU`;
}

/** `Forever`, `Stopping...` or `4 minutes from now`. */
function until(iso: string, now = Date.now()): string {
  const ms = Date.parse(iso) - now;
  if (ms > 20 * 365 * 86400_000) return 'Forever';
  if (ms <= 0) return 'Stopping...';
  const s = Math.round(ms / 1000);
  const [n, unit] =
    s < 60 ? [s, 'second'] : s < 3600 ? [Math.round(s / 60), 'minute'] : s < 86400 ? [Math.round(s / 3600), 'hour'] : [Math.round(s / 86400), 'day'];
  return n === 1 ? `About a${unit === 'hour' ? 'n' : ''} ${unit} from now` : `${n} ${unit}s from now`;
}

const seconds = (ns: number): string => (ns >= 1e9 ? `${(ns / 1e9).toFixed(6)}s` : `${(ns / 1e6).toFixed(6)}ms`);
const rate = (count: number, ns: number): string => (ns > 0 ? `${((count / ns) * 1e9).toFixed(2)} tokens/s` : 'n/a');

/** The statistics `ollama run --verbose` prints after each answer. */
function stats(c: ChatChunk): string {
  const rows: [string, string][] = [
    ['total duration', seconds(c.total_duration ?? 0)],
    ['load duration', seconds(c.load_duration ?? 0)],
    ['prompt eval count', `${c.prompt_eval_count ?? 0} token(s)`],
    ['prompt eval duration', seconds(c.prompt_eval_duration ?? 0)],
    ['prompt eval rate', rate(c.prompt_eval_count ?? 0, c.prompt_eval_duration ?? 0)],
    ['eval count', `${c.eval_count ?? 0} token(s)`],
    ['eval duration', seconds(c.eval_duration ?? 0)],
    ['eval rate', rate(c.eval_count ?? 0, c.eval_duration ?? 0)],
  ];
  return rows.map(([k, v]) => `${(k + ':').padEnd(22)}${v}`).join('\n') + '\n';
}

interface RunSettings {
  model: string;
  verbose: boolean;
  format?: string;
  keepAlive?: string;
}

/** Streams one answer to stdout; returns its text ('' when stopped before any). */
async function answer(client: ApiClient, io: CliIO, s: RunSettings, messages: Message[], signal?: AbortSignal): Promise<string> {
  const body = {
    model: s.model,
    messages,
    ...(s.format ? { format: s.format === 'json' ? 'json' : (JSON.parse(s.format) as unknown) } : {}),
    ...(s.keepAlive ? { keep_alive: s.keepAlive } : {}),
  };
  let text = '';
  let last: ChatChunk | undefined;
  try {
    for await (const chunk of client.stream<ChatChunk>('POST', '/api/chat', body, signal)) {
      const piece = chunk.message?.content ?? '';
      text += piece;
      io.stdout.write(piece);
      last = chunk;
    }
  } catch (err) {
    if (signal?.aborted) {
      io.stdout.write('\n');
      return text;
    }
    throw err;
  }
  io.stdout.write(text.endsWith('\n') ? '\n' : '\n\n');
  if (s.verbose && last) io.stderr.write(stats(last));
  return text;
}

async function readAll(stream: NodeJS.ReadableStream): Promise<string> {
  let text = '';
  for await (const chunk of stream) text += typeof chunk === 'string' ? chunk : chunk.toString('utf8');
  return text;
}

const HELP = `Available Commands:
  /set system <text>   Set the system message
  /clear               Clear the session context
  /bye                 Exit
  /?, /help            Help for a command

Use """ to begin and end a multi-line message.
`;

/** The interactive chat loop. */
async function chatLoop(client: ApiClient, io: CliIO, s: RunSettings): Promise<void> {
  const terminal = Boolean(io.stdin.isTTY);
  const rl = createInterface({ input: io.stdin, output: io.stdout, terminal, prompt: '>>> ' });
  const messages: Message[] = [];
  let system: string | undefined;
  let generation: AbortController | null = null;
  let multi: string[] | null = null;
  rl.on('SIGINT', () => {
    if (generation) generation.abort();
    else io.stdout.write('\nUse Ctrl + d or /bye to exit.\n>>> ');
  });
  if (terminal) rl.prompt();
  for await (const raw of rl) {
    let line = raw;
    if (multi) {
      const end = line.indexOf('"""');
      if (end < 0) {
        multi.push(line);
        continue;
      }
      multi.push(line.slice(0, end));
      line = multi.join('\n');
      multi = null;
    } else if (line.startsWith('"""')) {
      const rest = line.slice(3);
      const end = rest.indexOf('"""');
      if (end < 0) {
        multi = [rest];
        continue;
      }
      line = rest.slice(0, end);
    } else {
      line = line.trim();
      if (line === '/bye') break;
      if (line === '/?' || line === '/help') {
        io.stdout.write(HELP);
        if (terminal) rl.prompt();
        continue;
      }
      if (line === '/clear') {
        messages.length = 0;
        io.stdout.write('Cleared session context\n');
        if (terminal) rl.prompt();
        continue;
      }
      if (line.startsWith('/set system')) {
        system = line
          .slice('/set system'.length)
          .trim()
          .replace(/^"(.*)"$/s, '$1');
        io.stdout.write('Set system message.\n');
        if (terminal) rl.prompt();
        continue;
      }
      if (line.startsWith('/')) {
        io.stdout.write(`Unknown command '${line.split(/\s+/)[0]}'. Type /? for help\n`);
        if (terminal) rl.prompt();
        continue;
      }
    }
    if (line === '') {
      if (terminal) rl.prompt();
      continue;
    }
    messages.push({ role: 'user', content: line });
    generation = new AbortController();
    try {
      const reply = await answer(client, io, s, system ? [{ role: 'system', content: system }, ...messages] : messages, generation.signal);
      if (reply) messages.push({ role: 'assistant', content: reply });
      else messages.pop();
    } catch (err) {
      messages.pop();
      io.stderr.write(`Error: ${(err as Error).message}\n`);
    } finally {
      generation = null;
    }
    if (terminal) rl.prompt();
  }
  rl.close();
}

export const commands: CliCommand[] = [
  {
    name: 'run',
    summary: 'Chat with a model (interactive), or answer one prompt',
    usage: 'lia run MODEL [PROMPT] [--verbose] [--format json] [--keepalive 5m] [--interactive]',
    options: {
      verbose: { type: 'boolean' },
      format: { type: 'string' },
      keepalive: { type: 'string' },
      interactive: { type: 'boolean', short: 'i' },
    },
    async run(args, io) {
      const model = modelArg(args, this.usage);
      const settings: RunSettings = {
        model,
        verbose: Boolean(args.values['verbose']),
        ...(typeof args.values['format'] === 'string' ? { format: args.values['format'] } : {}),
        ...(typeof args.values['keepalive'] === 'string' ? { keepAlive: args.values['keepalive'] } : {}),
      };
      if (settings.format && settings.format !== 'json') {
        try {
          JSON.parse(settings.format);
        } catch {
          throw new CliError('--format must be "json" or a JSON schema', 2);
        }
      }
      const client = await io.client();
      // Load first, as `ollama run` does: an unknown model fails here with the server's message.
      await client.json('POST', '/api/chat', { model, messages: [], ...(settings.keepAlive ? { keep_alive: settings.keepAlive } : {}) });
      let prompt = args.positionals.slice(1).join(' ');
      const interactive = Boolean(args.values['interactive']) || (io.stdin.isTTY && prompt === '');
      if (interactive) {
        await chatLoop(client, io, settings);
        return 0;
      }
      if (!io.stdin.isTTY) {
        const piped = await readAll(io.stdin);
        prompt = prompt ? `${prompt}\n\n${piped}` : piped;
      }
      if (prompt.trim() === '') throw new CliError('nothing to ask: give a prompt or pipe one on stdin', 2);
      await answer(client, io, settings, [{ role: 'user', content: prompt }]);
      return 0;
    },
  },
  {
    name: 'ps',
    summary: 'List the models loaded in memory',
    usage: 'lia ps',
    async run(_args, io) {
      const client = await io.client();
      const { models } = await client.json<{ models: PsModel[] }>('GET', '/api/ps');
      const rows = [['NAME', 'ID', 'SIZE', 'PROCESSOR', 'DEVICE', 'CONTEXT', 'SLOTS', 'QUEUED', 'UNTIL']];
      for (const m of models) {
        const slots = m.parallel === undefined ? '' : `${m.running ?? 0}/${m.parallel}`;
        rows.push([
          m.name,
          m.digest.slice(0, 12),
          formatBytes(m.size),
          processor(m),
          m.device ?? '',
          String(m.context_length),
          slots,
          String(m.queued ?? ''),
          until(m.expires_at),
        ]);
      }
      io.stdout.write(table(rows));
      return 0;
    },
  },
  {
    name: 'stop',
    summary: 'Unload a model from memory now',
    usage: 'lia stop MODEL',
    async run(args, io) {
      const model = modelArg(args, this.usage);
      const client = await io.client();
      await client.json('POST', '/api/generate', { model, keep_alive: 0 });
      return 0;
    },
  },
];
