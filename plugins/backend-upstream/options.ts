/**
 * The options of `backend-upstream`: the upstream engines LIA fronts and the models they serve.
 * Validated by core at start (exit code 2 naming the field); the checks a schema cannot express
 * (a key from both a file and a variable, an upstream without models) are in {@link checkOptions}.
 *
 * @module
 */
import { Type, type Static } from 'lia/utils';

const Capability = Type.Union(['completion', 'chat', 'embedding', 'tools', 'insert', 'vision', 'audio', 'thinking'].map((c) => Type.Literal(c)));

/** One model an upstream serves: its name there, and the name LIA shows (defaults to the same). */
const ModelEntry = Type.Object(
  {
    /** The model's name on the upstream (`meta-llama/Llama-3.1-70B-Instruct`, `llama3.1:70b`). */
    model: Type.String({ minLength: 1, maxLength: 512 }),
    /** The name LIA shows and clients ask for. Defaults to `model`. */
    name: Type.Optional(Type.String({ minLength: 1, maxLength: 256 })),
    /** What it can do (`/api/show` → `capabilities`). Defaults to `["completion", "tools"]`. */
    capabilities: Type.Optional(Type.Array(Capability, { minItems: 1, uniqueItems: true })),
    /** Its context length, shown by `/api/ps`. Defaults to 0 (unknown). */
    context_length: Type.Optional(Type.Integer({ minimum: 0 })),
  },
  { additionalProperties: false },
);

const Upstream = Type.Object(
  {
    /** A short name for logs, metrics and errors: lower-case letters, digits, `-` and `_`. */
    name: Type.String({ pattern: '^[a-z0-9][a-z0-9_-]{0,63}$' }),
    /** Base URL, without `/v1`: `https://gpu1.lan:8000`. No user or password in it. */
    url: Type.String({ pattern: '^https?://[^/@\\s]+(/[^\\s@?#]*)?$' }),
    /** Its API: `openai` (vLLM, SGLang, TGI, llama-server, LIA's `/v1`) or `ollama` (Ollama, LIA's `/api`). */
    flavour: Type.Union([Type.Literal('openai'), Type.Literal('ollama')]),
    /** A file holding the bearer key LIA sends (trimmed). Never put the key itself in the config. */
    key_file: Type.Optional(Type.String({ minLength: 1 })),
    /** An environment variable holding the bearer key LIA sends. */
    key_env: Type.Optional(Type.String({ pattern: '^[A-Za-z_][A-Za-z0-9_]*$' })),
    /** A PEM file of CAs to trust for this upstream's HTTPS (instead of the system ones). */
    ca_file: Type.Optional(Type.String({ minLength: 1 })),
    /** Models it serves (a string is `{ model }`). Defaults to none. */
    models: Type.Array(Type.Union([Type.String({ minLength: 1, maxLength: 512 }), ModelEntry]), { default: [] }),
    /** Also list its models from `/v1/models` (openai) or `/api/tags` (ollama). Defaults to false. */
    discover: Type.Boolean({ default: false }),
    /** Names LIA shows for discovered models: `{ upstream name: LIA name }`. Defaults to none. */
    aliases: Type.Record(Type.String(), Type.String({ minLength: 1, maxLength: 256 }), { default: {} }),
    /** How often discovery runs again, in ms. Defaults to 60000. */
    refresh_ms: Type.Integer({ minimum: 1000, default: 60_000 }),
    /** Time to connect, in ms. Defaults to 5000. */
    connect_timeout_ms: Type.Integer({ minimum: 100, default: 5_000 }),
    /** Longest wait for the answer's headers and between two chunks of it, in ms. Defaults to 300000. */
    timeout_ms: Type.Integer({ minimum: 100, default: 300_000 }),
    /** Requests LIA sends it at once; more wait in the engine's queue. Defaults to 64. */
    max_concurrency: Type.Integer({ minimum: 1, maximum: 4096, default: 64 }),
  },
  { additionalProperties: false },
);

export const Options = Type.Object(
  {
    /** The upstream engines. Several that serve one LIA name are replicas of it. Defaults to none. */
    upstreams: Type.Array(Upstream, { default: [] }),
    /** How often each upstream's health is checked (and a failed one is taken back), in ms. Defaults to 10000. */
    health_interval_ms: Type.Integer({ minimum: 100, default: 10_000 }),
  },
  { additionalProperties: false },
);

export type UpstreamOptions = Static<typeof Upstream>;
export type UpstreamModelEntry = Static<typeof ModelEntry>;
export type BackendUpstreamOptions = Static<typeof Options>;

/** The checks the schema cannot express; each failure names the upstream. */
export function checkOptions(o: BackendUpstreamOptions): string[] {
  const problems: string[] = [];
  const names = new Set<string>();
  for (const u of o.upstreams) {
    if (names.has(u.name)) problems.push(`upstream "${u.name}" is declared twice`);
    names.add(u.name);
    if (u.key_file && u.key_env) problems.push(`upstream "${u.name}": give key_file or key_env, not both`);
    if (!u.discover && u.models.length === 0) problems.push(`upstream "${u.name}" lists no models and does not discover them`);
  }
  return problems;
}
