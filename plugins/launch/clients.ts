/**
 * How each coding agent is pointed at the appliance: the variables and arguments it reads for the
 * base URL, the key, the CA to trust, the model and its context window. The names come from the
 * clients themselves (their npm packages' binaries and documentation):
 *
 * - Claude Code: `ANTHROPIC_BASE_URL`, `ANTHROPIC_AUTH_TOKEN` (sent as a Bearer token, so no
 *   "use this API key?" question), `ANTHROPIC_MODEL` and the per-tier defaults; a Bun binary that
 *   reads `NODE_EXTRA_CA_CERTS`.
 * - Codex CLI: a model provider given with `-c` flags (`wire_api = "responses"`, the key read from
 *   `LIA_API_KEY` through `env_key`), `model_context_window`; a Rust binary that reads
 *   `CODEX_CA_CERTIFICATE` (and `SSL_CERT_FILE`).
 * - opencode: its whole configuration in `OPENCODE_CONFIG_CONTENT` (an `@ai-sdk/openai-compatible`
 *   provider, which the binary bundles, with the model's context limit); Bun, `NODE_EXTRA_CA_CERTS`.
 * - Qwen Code: `--auth-type openai`, `OPENAI_BASE_URL`, `OPENAI_API_KEY`, `OPENAI_MODEL`; Node,
 *   `NODE_EXTRA_CA_CERTS`.
 *
 * @module
 */

/** What a launch knows once the appliance is prepared. */
export interface LaunchTarget {
  /** `https://HOST:8443`, no trailing slash. */
  url: string;
  /** The named key's secret. */
  key: string;
  /** Absolute path of the CA certificate (PEM) the client must trust. */
  caFile: string;
  model: string;
  /** The context window the model is served with, in tokens. */
  contextLength: number;
}

export interface AgentClient {
  /** `claude`, `codex`, `opencode`, `qwen`: the `lia launch` argument and the key's suffix. */
  name: string;
  /** The product, for messages. */
  title: string;
  /** The executable looked up on PATH. */
  bin: string;
  /** How to install it, shown when it is missing. */
  install: string;
  /** The API surface it talks to. */
  surface: string;
  /** Variables to set (a null value removes an inherited one) and arguments put before the user's. */
  settings(t: LaunchTarget): { env: Record<string, string | null>; args: string[] };
}

const toml = (s: string): string => JSON.stringify(s);

export const CLIENTS: readonly AgentClient[] = [
  {
    name: 'claude',
    title: 'Claude Code',
    bin: 'claude',
    install: 'npm install -g @anthropic-ai/claude-code',
    surface: '/v1/messages',
    settings: (t) => ({
      env: {
        ANTHROPIC_BASE_URL: t.url,
        ANTHROPIC_AUTH_TOKEN: t.key,
        // An inherited Anthropic key would be sent instead of LIA's.
        ANTHROPIC_API_KEY: null,
        ANTHROPIC_MODEL: t.model,
        ANTHROPIC_DEFAULT_OPUS_MODEL: t.model,
        ANTHROPIC_DEFAULT_SONNET_MODEL: t.model,
        ANTHROPIC_DEFAULT_HAIKU_MODEL: t.model,
        ANTHROPIC_SMALL_FAST_MODEL: t.model,
        // The window the model is served with: Claude Code otherwise takes an unknown model's as
        // its largest (a million tokens), says so, and compacts far too late.
        CLAUDE_CODE_AUTO_COMPACT_WINDOW: String(t.contextLength),
        NODE_EXTRA_CA_CERTS: t.caFile,
      },
      args: [],
    }),
  },
  {
    name: 'codex',
    title: 'Codex CLI',
    bin: 'codex',
    install: 'npm install -g @openai/codex',
    surface: '/v1/responses',
    settings: (t) => ({
      env: { LIA_API_KEY: t.key, CODEX_CA_CERTIFICATE: t.caFile, SSL_CERT_FILE: t.caFile },
      args: [
        '-c',
        'model_provider="lia"',
        '-c',
        `model_providers.lia={ name = "LIA", base_url = ${toml(`${t.url}/v1`)}, env_key = "LIA_API_KEY", wire_api = "responses" }`,
        '-c',
        `model=${toml(t.model)}`,
        '-c',
        `model_context_window=${t.contextLength}`,
      ],
    }),
  },
  {
    name: 'opencode',
    title: 'opencode',
    bin: 'opencode',
    install: 'npm install -g opencode-ai',
    surface: '/v1/chat/completions',
    settings: (t) => ({
      env: {
        LIA_API_KEY: t.key,
        NODE_EXTRA_CA_CERTS: t.caFile,
        OPENCODE_CONFIG_CONTENT: JSON.stringify({
          $schema: 'https://opencode.ai/config.json',
          provider: {
            lia: {
              npm: '@ai-sdk/openai-compatible',
              name: 'LIA',
              options: { baseURL: `${t.url}/v1`, apiKey: '{env:LIA_API_KEY}' },
              models: {
                [t.model]: { name: t.model, tool_call: true, limit: { context: t.contextLength, output: Math.min(8192, Math.floor(t.contextLength / 4)) } },
              },
            },
          },
          model: `lia/${t.model}`,
          small_model: `lia/${t.model}`,
        }),
      },
      args: [],
    }),
  },
  {
    name: 'qwen',
    title: 'Qwen Code',
    bin: 'qwen',
    install: 'npm install -g @qwen-code/qwen-code',
    surface: '/v1/chat/completions',
    settings: (t) => ({
      env: { OPENAI_BASE_URL: `${t.url}/v1`, OPENAI_API_KEY: t.key, OPENAI_MODEL: t.model, NODE_EXTRA_CA_CERTS: t.caFile },
      args: ['--auth-type', 'openai'],
    }),
  },
];

export function findClient(name: string): AgentClient | undefined {
  return CLIENTS.find((c) => c.name === name);
}
