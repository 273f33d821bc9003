/**
 * GGUF metadata, read with node-llama-cpp's `readGgufFileInfo` (the header only; the model is
 * never loaded): the `details` of `/api/tags`, the `model_info` of `/api/show` and what the model
 * can do. The `gguf` format handler (`format.ts`) describes stored models with it.
 *
 * @module
 */
import type { GgufFileInfo } from 'node-llama-cpp';
import { Errors, humanNumber, type FormatDescription } from 'lia/plugin';

/** Big arrays nobody needs for listing; parsing them costs time on 150k-token vocabularies. */
const HEAVY_KEYS = ['tokenizer.ggml.tokens', 'tokenizer.ggml.merges', 'tokenizer.ggml.token_type', 'tokenizer.ggml.scores'];

/** What is kept of a GGUF file's header. */
export interface GgufSummary {
  details: FormatDescription['details'];
  /** Flattened metadata (`general.architecture`, `llama.context_length`, ...). */
  modelInfo: Record<string, unknown>;
  /** `tokenizer.chat_template`, if the file has one. */
  chatTemplate?: string;
  /** True when the file declares a pooling type (an embedding model). */
  pooling: boolean;
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

/** node-llama-cpp takes over a second to import; it is loaded on first use only. */
let library: Promise<typeof import('node-llama-cpp')> | undefined;
function llama(): Promise<typeof import('node-llama-cpp')> {
  return (library ??= import('node-llama-cpp'));
}

function quantization(info: GgufFileInfo, { GgufFileType, GgmlType }: typeof import('node-llama-cpp')): string {
  const fileType = info.metadata.general?.file_type;
  if (typeof fileType === 'number' && GgufFileType[fileType]) return GgufFileType[fileType].replace(/^MOSTLY_/, '');
  // No file_type (stories260K): name the type that holds most of the weights.
  const bytesByType = new Map<number, number>();
  for (const t of info.tensorInfo ?? []) {
    const count = t.dimensions.reduce<number>((a, d) => a * Number(d), 1);
    bytesByType.set(t.ggmlType, (bytesByType.get(t.ggmlType) ?? 0) + count);
  }
  const top = [...bytesByType.entries()].sort((a, b) => b[1] - a[1])[0];
  return top ? (GgmlType[top[0]] ?? 'unknown') : 'unknown';
}

function parameterCount(info: GgufFileInfo): number {
  const declared = (info.metadata.general as { parameter_count?: number | bigint } | undefined)?.parameter_count;
  if (declared !== undefined) return Number(declared);
  return (info.tensorInfo ?? []).reduce((n, t) => n + t.dimensions.reduce<number>((a, d) => a * Number(d), 1), 0);
}

/** Reads a GGUF file's header; a file that is not GGUF is a 400. */
export async function readGguf(file: string, options: { verbose?: boolean } = {}): Promise<GgufSummary> {
  const lib = await llama();
  let info: GgufFileInfo;
  try {
    info = await lib.readGgufFileInfo(file, { ignoreKeys: options.verbose ? [] : HEAVY_KEYS, logWarnings: false });
  } catch (err) {
    throw Errors.badRequest(`the file is not a valid GGUF model: ${(err as Error).message}`, { cause: err });
  }
  const arch = String(info.metadata.general?.architecture ?? 'unknown');
  const count = parameterCount(info);
  const meta = info.metadata as unknown as Record<string, unknown>;
  const tokenizer = meta['tokenizer'] as { chat_template?: unknown } | undefined;
  const modelInfo = flattenMetadata(meta, options.verbose ?? false);
  delete modelInfo['general.name'];
  delete modelInfo['tokenizer.chat_template'];
  modelInfo['general.parameter_count'] ??= count;
  const archMeta = meta[arch] as { pooling_type?: unknown } | undefined;
  const sizeLabel = (info.metadata.general as { size_label?: string } | undefined)?.size_label;
  return {
    details: {
      family: arch,
      families: [arch],
      parameter_size: count > 0 ? humanNumber(count) : (sizeLabel ?? ''),
      quantization_level: quantization(info, lib),
    },
    modelInfo,
    chatTemplate: typeof tokenizer?.chat_template === 'string' ? tokenizer.chat_template : undefined,
    pooling: archMeta?.pooling_type !== undefined,
    parameterCount: count,
  };
}
