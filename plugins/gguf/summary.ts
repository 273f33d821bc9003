/**
 * GGUF metadata, read with the bounded header reader of header.ts (the header only; the
 * model is never loaded, and no file can make the reading allocate more than a few MiB outside
 * the verbose view): the `details` of `/api/tags`, the `model_info` of `/api/show` and what the
 * model can do. The `gguf` format handler (`format.ts`) describes stored models with it.
 *
 * @module
 */
import { Errors } from 'lia/plugin';
import type { FormatDescription } from 'lia/engine';
import { humanNumber } from 'lia/utils';
import { GgufHeaderError, readGgufHeader, type GgufHeader } from './header.js';

/** llama.cpp's `LLAMA_POOLING_TYPE_RANK`: the pooled output is a relevance score. */
const POOLING_RANK = 4;

/** Big arrays nobody needs for listing: left out of the non-verbose view (skipped unread). */
const HEAVY_KEYS = ['tokenizer.ggml.tokens', 'tokenizer.ggml.merges', 'tokenizer.ggml.token_type', 'tokenizer.ggml.scores'];

/** What is kept of a GGUF file's header. */
export interface GgufSummary {
  details: FormatDescription['details'];
  /** Flattened metadata (`general.architecture`, `llama.context_length`, ...). */
  modelInfo: Record<string, unknown>;
  /** `tokenizer.chat_template`, if the file has one. */
  chatTemplate?: string;
  /** True when the file declares a pooling type (an embedding model, or a reranker). */
  pooling: boolean;
  /**
   * True for a reranker: pooling type RANK (4), or a classification head (`cls.weight`,
   * `cls.output.weight`), which node-llama-cpp's ranking context looks for.
   */
  ranking: boolean;
  parameterCount: number;
}

/** Flattens nested metadata into dotted keys; bigints become numbers, long arrays `[]`. */
export function flattenMetadata(value: unknown, verbose: boolean, prefix = '', out: Record<string, unknown> = {}): Record<string, unknown> {
  if (value && typeof value === 'object' && !Array.isArray(value)) {
    for (const [k, v] of Object.entries(value)) flattenMetadata(v, verbose, prefix ? `${prefix}.${k}` : k, out);
    return out;
  }
  const plain = (v: unknown): unknown => (typeof v === 'bigint' ? Number(v) : v);
  if (Array.isArray(value)) out[prefix] = !verbose && value.length > 5 ? [] : value.map(plain);
  else out[prefix] = plain(value);
  return out;
}

/** node-llama-cpp takes over a second to import; it is loaded on first use only, for the names of its type enums. */
let library: Promise<typeof import('node-llama-cpp')> | undefined;
function llama(): Promise<typeof import('node-llama-cpp')> {
  return (library ??= import('node-llama-cpp'));
}

function quantization(header: GgufHeader, { GgufFileType, GgmlType }: typeof import('node-llama-cpp')): string {
  const fileType = header.metadata.get('general.file_type');
  if (typeof fileType === 'number' && GgufFileType[fileType]) return GgufFileType[fileType].replace(/^MOSTLY_/, '');
  // No file_type (stories260K): name the type that holds most of the weights.
  const top = [...header.elementsByType.entries()].sort((a, b) => b[1] - a[1])[0];
  return top ? (GgmlType[top[0]] ?? 'unknown') : 'unknown';
}

function parameterCount(header: GgufHeader): number {
  const declared = header.metadata.get('general.parameter_count');
  if (typeof declared === 'number') return declared;
  let n = 0;
  for (const count of header.elementsByType.values()) n += count;
  return n;
}

/**
 * Groups dotted keys by their prefixes, in the order the prefixes first appear (`general.*`
 * together, then `llama.*`, ...), as the metadata reads best; a key that collides with a
 * prefix of another stays as it is, after the rest.
 */
function nest(metadata: Map<string, unknown>): Record<string, unknown> {
  const root: Record<string, unknown> = {};
  const loose: Record<string, unknown> = {};
  for (const [key, value] of metadata) {
    const parts = key.split('.');
    let node = root;
    let ok = true;
    for (const part of parts.slice(0, -1)) {
      const next = Object.hasOwn(node, part) ? node[part] : (node[part] = Object.create(null) as Record<string, unknown>);
      if (!next || typeof next !== 'object' || Array.isArray(next)) {
        ok = false;
        break;
      }
      node = next as Record<string, unknown>;
    }
    const last = parts.at(-1)!;
    if (ok && !Object.hasOwn(node, last)) node[last] = value;
    else loose[key] = value;
  }
  return { ...flattenMetadata(root, true), ...loose };
}

/**
 * Reads a GGUF file's header with the bounds of header.ts. A file that is not GGUF, or whose
 * header is not plausible (see there), is a 400 naming the reason.
 */
export async function readGguf(file: string, options: { verbose?: boolean } = {}): Promise<GgufSummary> {
  const verbose = options.verbose ?? false;
  let header: GgufHeader;
  try {
    header = await readGgufHeader(file, verbose ? { maxArrayLength: Number.MAX_SAFE_INTEGER } : { maxArrayLength: 5, ignoreKeys: HEAVY_KEYS });
  } catch (err) {
    if (!(err instanceof GgufHeaderError)) throw err;
    throw Errors.badRequest(`the file is not a valid GGUF model: ${err.message}`, { cause: err });
  }
  const lib = await llama();
  const meta = header.metadata;
  const archName = meta.get('general.architecture');
  const arch = typeof archName === 'string' ? archName : 'unknown';
  const count = parameterCount(header);
  const chatTemplate = meta.get('tokenizer.chat_template');
  const modelInfo = nest(meta);
  delete modelInfo['general.name'];
  delete modelInfo['tokenizer.chat_template'];
  modelInfo['general.parameter_count'] ??= count;
  const sizeLabel = meta.get('general.size_label');
  return {
    details: {
      family: arch,
      families: [arch],
      parameter_size: count > 0 ? humanNumber(count) : typeof sizeLabel === 'string' ? sizeLabel : '',
      quantization_level: quantization(header, lib),
    },
    modelInfo,
    chatTemplate: typeof chatTemplate === 'string' ? chatTemplate : undefined,
    pooling: meta.has(`${arch}.pooling_type`),
    ranking: meta.get(`${arch}.pooling_type`) === POOLING_RANK || header.classifierHead,
    parameterCount: count,
  };
}
