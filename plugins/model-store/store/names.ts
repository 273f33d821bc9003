/**
 * Model names, by Ollama's grammar: `[scheme://][host/][namespace/]model[:tag]` with the defaults
 * `registry.ollama.ai`, `library` and `latest`. Every part is checked against a strict ASCII
 * alphabet, so a valid name can never climb out of the store (`..`, `/`, NUL, unicode) once it
 * becomes a path.
 *
 * @module
 */
import { Errors } from 'lia/plugin';

/** Registry host used when a name has none. */
export const DEFAULT_HOST = 'registry.ollama.ai';
/** Namespace used when a name has none. */
export const DEFAULT_NAMESPACE = 'library';
/** Tag used when a name has none. */
export const DEFAULT_TAG = 'latest';

/** A fully qualified model name. */
export interface ModelName {
  /** `https` unless the name was written with `http://`. */
  scheme: 'http' | 'https';
  host: string;
  namespace: string;
  model: string;
  tag: string;
}

const HOST = /^[A-Za-z0-9_][A-Za-z0-9_.:-]{0,349}$/;
const NAMESPACE = /^[A-Za-z0-9_][A-Za-z0-9_-]{0,79}$/;
const MODEL_OR_TAG = /^[A-Za-z0-9_][A-Za-z0-9_.-]{0,79}$/;

/** Why `part` is not valid for `kind`, or null when it is. */
function partProblem(kind: 'host' | 'namespace' | 'model' | 'tag', part: string): string | null {
  if (part.length === 0) return `the ${kind} is empty`;
  const re = kind === 'host' ? HOST : kind === 'namespace' ? NAMESPACE : MODEL_OR_TAG;
  if (re.test(part)) return null;
  const max = kind === 'host' ? 350 : 80;
  if (part.length > max) return `the ${kind} is longer than ${max} characters`;
  if (!/^[A-Za-z0-9_]/.test(part)) return `the ${kind} "${printable(part)}" must start with a letter, a digit or "_"`;
  const allowed =
    kind === 'host' ? 'letters, digits, "_", ".", ":" and "-"' : kind === 'namespace' ? 'letters, digits, "_" and "-"' : 'letters, digits, "_", "." and "-"';
  return `the ${kind} "${printable(part)}" may contain only ${allowed}`;
}

/** Shows control and non-ASCII characters as escapes so an error message stays readable. */
function printable(s: string): string {
  return s.replace(/[^\x20-\x7e]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}

/** Parses a name, or returns why it is invalid. Never throws. */
export function tryParseName(raw: string): { name: ModelName } | { problem: string } {
  let rest = raw;
  let scheme: ModelName['scheme'] = 'https';
  const schemeMatch = /^(https?):\/\//.exec(rest);
  if (schemeMatch) {
    scheme = schemeMatch[1] as ModelName['scheme'];
    rest = rest.slice(schemeMatch[0].length);
  }
  if (rest.length === 0) return { problem: 'the name is empty' };
  let tag = DEFAULT_TAG;
  const colon = rest.lastIndexOf(':');
  if (colon > rest.lastIndexOf('/')) {
    tag = rest.slice(colon + 1);
    rest = rest.slice(0, colon);
  }
  const parts = rest.split('/');
  if (parts.length > 3) return { problem: 'a name has at most three parts: host/namespace/model' };
  const model = parts.pop() ?? '';
  const namespace = parts.length > 0 ? (parts.pop() ?? '') : DEFAULT_NAMESPACE;
  const host = parts.length > 0 ? (parts.pop() ?? '') : DEFAULT_HOST;
  const name: ModelName = { scheme, host, namespace, model, tag };
  for (const kind of ['host', 'namespace', 'model', 'tag'] as const) {
    const problem = partProblem(kind, name[kind]);
    if (problem) return { problem };
  }
  return { name };
}

/** Parses a name; an invalid one is a 400 that says why. */
export function parseName(raw: string, field = 'model'): ModelName {
  const result = tryParseName(raw);
  if ('problem' in result) throw Errors.badRequest(`invalid ${field} name "${printable(raw)}": ${result.problem}`, { param: field });
  return result.name;
}

/** The shortest form clients show: `model:tag`, `ns/model:tag` or `host/ns/model:tag`. */
export function displayName(n: ModelName): string {
  if (n.host === DEFAULT_HOST) {
    return n.namespace === DEFAULT_NAMESPACE ? `${n.model}:${n.tag}` : `${n.namespace}/${n.model}:${n.tag}`;
  }
  return `${n.host}/${n.namespace}/${n.model}:${n.tag}`;
}

/** The full form, `host/namespace/model:tag`. */
export function fullName(n: ModelName): string {
  return `${n.host}/${n.namespace}/${n.model}:${n.tag}`;
}

/** True when two names denote the same model; Ollama compares each part case-insensitively. */
export function sameName(a: ModelName, b: ModelName): boolean {
  return fullName(a).toLowerCase() === fullName(b).toLowerCase();
}
