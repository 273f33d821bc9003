/**
 * What `lia launch` asks of the appliance before a client starts: a named key of the client's
 * own, the model, and a context window large enough for an agent.
 *
 * - Key: `launch-<client>` with the `inference` scope only (never the master key). Its secret is
 *   kept in a 0600 file under `~/.config/lia/launch/` (`XDG_CONFIG_HOME` honoured), one per
 *   appliance and client, so a second launch reuses it and a session already running keeps
 *   working. When the file is missing or its secret no longer works (revoked, rotated, expired),
 *   the key is rotated if it exists and created otherwise, and the file rewritten.
 * - Model: `--model`, else the first model of `/api/tags` that generates text (not an
 *   embedding-only model, not a remote one).
 * - Context: agents send prompts of 15,000 to 30,000 tokens. When the model's stored `num_ctx`
 *   is below `--ctx` (default 32768, capped at the model's trained context), the model is
 *   re-created under its own name with that `num_ctx` (`/api/create` with `from`: the weights
 *   are shared), as Ollama's `/set parameter num_ctx` + `/save` does.
 *
 * @module
 */
import { createHash } from 'node:crypto';
import { mkdir, readFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Agent, fetch } from 'undici';
import { CliError, type ApiClient } from 'lia/plugin';
import { writeFileAtomic } from 'lia/utils';

/** The context window agents need, in tokens, unless `--ctx` says otherwise. */
export const AGENT_CONTEXT = 32768;

/** The named key a client's launches use. */
export const keyName = (client: string): string => `launch-${client}`;

/** Where the key's secret is kept for this appliance and client. */
export function secretFile(env: NodeJS.ProcessEnv, url: string, client: string): string {
  const config = env['XDG_CONFIG_HOME'] || path.join(env['HOME'] || os.homedir(), '.config');
  const host = new URL(url).host.replace(/[^A-Za-z0-9.-]+/g, '_');
  const tag = createHash('sha256').update(url).digest('hex').slice(0, 8);
  return path.join(config, 'lia', 'launch', `${host}-${tag}`, `${client}.key`);
}

/**
 * Whether `key` is accepted for inference: an empty chat request is refused for its body (400)
 * when the key holds the scope, before any model is touched, and with 401/403 otherwise.
 */
async function works(url: string, ca: string, key: string): Promise<boolean> {
  const dispatcher = new Agent({ connect: { ca } });
  try {
    const res = await fetch(`${url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: '{}',
      dispatcher,
    });
    await res.body?.cancel();
    return res.status === 400;
  } catch {
    return false;
  } finally {
    await dispatcher.close();
  }
}

/** The secret of `launch-<client>`: the kept one while it works, else a rotated or new one. */
export async function launchKey(
  client: ApiClient,
  env: NodeJS.ProcessEnv,
  ca: string,
  name: string,
): Promise<{ key: string; how: 'reused' | 'rotated' | 'created' }> {
  const file = secretFile(env, client.url, name);
  const kept = (await readFile(file, 'utf8').catch(() => '')).trim();
  if (kept && (await works(client.url, ca, kept))) return { key: kept, how: 'reused' };
  const { keys } = await client.json<{ keys: Array<{ name: string; scopes?: string[]; models?: string[] | null }> }>('GET', '/system/api-keys');
  const found = keys.find((k) => k.name === keyName(name));
  // A key of that name made by someone else may hold more than inference: it is never handed on.
  if (found && (found.scopes?.length !== 1 || found.scopes[0] !== 'inference')) {
    throw new CliError(
      `a key named "${keyName(name)}" exists with the scopes ${JSON.stringify(found.scopes ?? [])}; lia launch gives agents an inference-only key of that name: revoke it (lia key revoke ${keyName(name)}) or rename it, then launch again`,
    );
  }
  const exists = found !== undefined;
  const body = exists
    ? await client.json<{ key: string }>('POST', `/system/api-keys/${encodeURIComponent(keyName(name))}/rotate`)
    : await client.json<{ key: string }>('POST', '/system/api-keys', { name: keyName(name), scopes: ['inference'] });
  await mkdir(path.dirname(file), { recursive: true, mode: 0o700 });
  await writeFileAtomic(file, `${body.key}\n`, { mode: 0o600 });
  return { key: body.key, how: exists ? 'rotated' : 'created' };
}

interface ShowBody {
  capabilities?: string[];
  parameters?: string;
  model_info?: Record<string, unknown>;
  remote_host?: string;
}

const show = (client: ApiClient, model: string): Promise<ShowBody> => client.json<ShowBody>('POST', '/api/show', { model });

/** `--model`, else the first local model that generates text. */
export async function pickModel(client: ApiClient, asked: string | undefined): Promise<string> {
  if (asked) return asked;
  const { models } = await client.json<{ models: Array<{ name: string; remote_host?: string }> }>('GET', '/api/tags');
  for (const m of models) {
    if (m.remote_host) continue;
    const info = await show(client, m.name);
    if (info.capabilities?.includes('completion')) return m.name;
  }
  throw new CliError('the appliance has no chat model: add one ("lia pull NAME" or "lia create NAME -f Modelfile"), or name one with --model');
}

/** The stored `num_ctx` in `/api/show`'s `parameters` text, if any. */
function storedNumCtx(parameters: string | undefined): number | undefined {
  const m = /^num_ctx\s+(\d+)\s*$/m.exec(parameters ?? '');
  return m ? Number(m[1]) : undefined;
}

/** The model's trained context (`<arch>.context_length` of its metadata), if known. */
function trainedContext(info: Record<string, unknown> | undefined): number | undefined {
  const entry = Object.entries(info ?? {}).find(([k, v]) => k.endsWith('.context_length') && typeof v === 'number');
  return entry ? (entry[1] as number) : undefined;
}

/**
 * Makes sure the model is served with at least `want` tokens of context (capped at its trained
 * context); returns the context it will have and whether the model was re-created to get it.
 */
export async function ensureContext(client: ApiClient, model: string, want: number): Promise<{ contextLength: number; changed: boolean }> {
  const info = await show(client, model);
  if (!info.capabilities?.includes('completion'))
    throw new CliError(`"${model}" does not generate text (capabilities: ${info.capabilities?.join(', ') || 'none'}); name a chat model with --model`);
  const trained = trainedContext(info.model_info);
  const target = trained ? Math.min(want, trained) : want;
  const stored = storedNumCtx(info.parameters);
  if (stored !== undefined && stored >= target) return { contextLength: stored, changed: false };
  if (info.remote_host) return { contextLength: stored ?? target, changed: false };
  await client.json('POST', '/api/create', { model, from: model, parameters: { num_ctx: target }, stream: false });
  return { contextLength: target, changed: true };
}
