/**
 * Parses a Modelfile (Ollama's syntax) into the parts of an `/api/create` request:
 *
 * ```
 * # comment
 * FROM ./model.gguf            (a file, an ONNX folder, or an existing model name)
 * FROM ./mmproj.gguf           (optional: a vision projector for the GGUF above)
 * ADAPTER ./lora.gguf          (optional, repeatable: a GGUF LoRA adapter for the weights)
 * DRAFT llama3:1b              (optional: a draft model for speculative decoding, a model name or a .gguf file)
 * TEMPLATE """{{ .Prompt }}"""
 * SYSTEM You are terse.
 * PARAMETER temperature 0.7
 * PARAMETER stop "<|im_end|>"
 * LICENSE """MIT ..."""
 * MESSAGE user Hello
 * ```
 *
 * Instructions are case-insensitive; a value is the rest of the line, a `"quoted"` string or a
 * `"""multi-line"""` block. Pure: no file access, so the CLI and the tests share it.
 *
 * @module
 */

/** What a Modelfile says. */
export interface Modelfile {
  from: string;
  /**
   * The files of FROM lines after the first: files that go with the first one's weights (a vision
   * projector GGUF, as Ollama writes `FROM model.gguf` then `FROM mmproj.gguf`). Defaults to none.
   */
  extraFrom: string[];
  /** The files of ADAPTER lines: GGUF LoRA adapters applied with the weights. Defaults to none. */
  adapters: string[];
  /**
   * The DRAFT line: a stored model's name or a file, the draft model of speculative decoding (the
   * parameter `draft_model` once created; the CLI uploads a file as a model of its own first).
   */
  draft?: string;
  template?: string;
  system?: string;
  parameters: Record<string, unknown>;
  license: string[];
  messages: Array<{ role: string; content: string }>;
}

/** A Modelfile error with its line number. */
export class ModelfileError extends Error {
  override readonly name = 'ModelfileError';
  constructor(
    message: string,
    readonly line: number,
  ) {
    super(`line ${line}: ${message}`);
  }
}

const INSTRUCTIONS = new Set(['FROM', 'TEMPLATE', 'SYSTEM', 'PARAMETER', 'LICENSE', 'MESSAGE', 'ADAPTER', 'DRAFT', 'REQUIRES', 'RENDERER', 'PARSER']);
const ROLES = new Set(['system', 'user', 'assistant', 'tool']);
/** Options that take a list; the others take one value. */
const LIST_PARAMETERS = new Set(['stop']);

/** Turns a parameter's text into the JSON value Ollama stores (numbers, booleans, strings). */
export function parameterValue(text: string): unknown {
  if (/^-?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$/.test(text)) return Number(text);
  if (text === 'true' || text === 'false') return text === 'true';
  return text;
}

/** Reads one value starting at `src[i]`: a `"""block"""`, a `"string"` or the rest of the line. */
function readValue(src: string, i: number, lineNo: () => number): { value: string; next: number } {
  if (src.startsWith('"""', i)) {
    const end = src.indexOf('"""', i + 3);
    if (end < 0) throw new ModelfileError('a """ block is not closed', lineNo());
    return { value: src.slice(i + 3, end), next: end + 3 };
  }
  const eol = src.indexOf('\n', i);
  const lineEnd = eol < 0 ? src.length : eol;
  const rest = src.slice(i, lineEnd).trim();
  if (rest.startsWith('"') && rest.endsWith('"') && rest.length >= 2) {
    try {
      return { value: JSON.parse(rest) as string, next: lineEnd };
    } catch {
      return { value: rest.slice(1, -1), next: lineEnd };
    }
  }
  return { value: rest, next: lineEnd };
}

/** Parses Modelfile text; throws {@link ModelfileError} naming the line. */
export function parseModelfile(src: string): Modelfile {
  const text = src.replace(/\r\n?/g, '\n');
  const out: Partial<Modelfile> & Pick<Modelfile, 'parameters' | 'license' | 'messages' | 'extraFrom' | 'adapters'> = {
    parameters: {},
    license: [],
    messages: [],
    extraFrom: [],
    adapters: [],
  };
  let i = 0;
  const lineAt = (pos: number): number => text.slice(0, pos).split('\n').length;
  while (i < text.length) {
    while (i < text.length && /\s/.test(text[i]!)) i++;
    if (i >= text.length) break;
    const start = i;
    if (text[i] === '#') {
      const eol = text.indexOf('\n', i);
      i = eol < 0 ? text.length : eol;
      continue;
    }
    const m = /^([A-Za-z]+)[ \t]+/.exec(text.slice(i, i + 64));
    if (!m)
      throw new ModelfileError(
        `expected an instruction (FROM, TEMPLATE, SYSTEM, PARAMETER, LICENSE, MESSAGE), got "${text.slice(i, i + 20).split('\n')[0]}"`,
        lineAt(i),
      );
    const instruction = m[1]!.toUpperCase();
    if (!INSTRUCTIONS.has(instruction)) throw new ModelfileError(`unknown instruction "${m[1]}"`, lineAt(i));
    i += m[0].length;
    const line = (): number => lineAt(start);
    switch (instruction) {
      case 'PARAMETER':
      case 'MESSAGE': {
        const k = /^(\S+)[ \t]+/.exec(text.slice(i, i + 256));
        if (!k) throw new ModelfileError(`${instruction} needs a ${instruction === 'PARAMETER' ? 'name' : 'role'} and a value`, line());
        i += k[0].length;
        const { value, next } = readValue(text, i, line);
        i = next;
        if (instruction === 'PARAMETER') {
          const key = k[1]!.toLowerCase();
          if (LIST_PARAMETERS.has(key)) ((out.parameters[key] ??= []) as unknown[]).push(value);
          else out.parameters[key] = parameterValue(value);
        } else {
          const role = k[1]!.toLowerCase();
          if (!ROLES.has(role)) throw new ModelfileError(`MESSAGE role "${k[1]}" is not one of system, user, assistant, tool`, line());
          out.messages.push({ role, content: value });
        }
        break;
      }
      default: {
        const { value, next } = readValue(text, i, line);
        i = next;
        if (instruction === 'FROM') {
          if (out.from === undefined) out.from = value;
          else out.extraFrom.push(value);
        } else if (instruction === 'TEMPLATE') out.template = value;
        else if (instruction === 'SYSTEM') out.system = value;
        else if (instruction === 'LICENSE') out.license.push(value);
        else if (instruction === 'ADAPTER') out.adapters.push(value);
        else if (instruction === 'DRAFT') {
          if (out.draft !== undefined) throw new ModelfileError('a Modelfile has one DRAFT line', line());
          out.draft = value;
        } else throw new ModelfileError(`${instruction} is not supported by this appliance`, line());
      }
    }
  }
  if (!out.from) throw new ModelfileError('the Modelfile has no FROM line', 1);
  return out as Modelfile;
}
