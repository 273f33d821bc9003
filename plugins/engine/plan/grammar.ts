/**
 * The grammar an answer is sampled under, written once for every GGUF engine: llama.cpp's GBNF,
 * which node-llama-cpp (`llama.createGrammar`) and llama-server (`grammar`) both take as it is,
 * so a format or a forced call admits exactly the same text on each. It is compiled from the
 * answer schema (answer-schema.ts has already rewritten it into the subset this compiler knows).
 *
 * The JSON it admits is written one way, the way `JSON.stringify(value, null, 1)` would be on one
 * line: a space after each `:` and `,`, no other whitespace. Each engine's own JSON-schema
 * compiler would let the model spend tokens on layout (llama.cpp's admits up to two newlines and
 * twenty spaces between any two tokens), so an answer under `max_tokens` was cut where the same
 * call fitted on the other engine. Numbers are bounded (16 digits before and after the point, 15
 * in an exponent) so that no answer can be an endless number. `minProperties`/`maxProperties`
 * bound nothing (every declared property is written; extra ones follow where allowed).
 *
 * @module
 */

/** A JSON schema in the answer subset (answer-schema.ts). */
type Schema = Record<string, unknown>;

const PRIMITIVES = {
  ws: '" "',
  char: '[^"\\\\\\x00-\\x1F\\x7F] | "\\\\" (["\\\\/bfnrt] | "u" [0-9a-fA-F]{4})',
  string: '"\\"" char* "\\""',
  integer: '"-"? ("0" | [1-9] [0-9]{0,15})',
  number: 'integer ("." [0-9]{1,16})? ([eE] [-+]? [0-9]{1,15})?',
  boolean: '"true" | "false"',
  null: '"null"',
  value: 'object | array | string | number | boolean | null',
  object: '"{" (string ":" ws value ("," ws string ":" ws value)*)? "}"',
  array: '"[" (value ("," ws value)*)? "]"',
  date: '[0-9]{4} "-" ("0" [1-9] | "1" [0-2]) "-" ("0" [1-9] | [1-2] [0-9] | "3" [0-1])',
  time: '([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9] ":" [0-5] [0-9] ("." [0-9]{1,6})? ("Z" | [+-] ([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9])',
} as const;

/** The GBNF of `schema` ('json': any JSON object). */
export function answerGrammar(schema: Schema | 'json'): string {
  return new Compiler(schema === 'json' ? undefined : schema).text();
}

class Compiler {
  readonly #rules = new Map<string, string>();
  readonly #used = new Set<keyof typeof PRIMITIVES>();
  readonly #defs: Schema;
  #next = 0;

  constructor(readonly schema: Schema | undefined) {
    this.#defs = (schema?.['$defs'] as Schema | undefined) ?? {};
    for (const name of Object.keys(this.#defs)) this.#rules.set(defRule(name), '');
    for (const [name, def] of Object.entries(this.#defs)) this.#rules.set(defRule(name), this.#expr(def as Schema));
    this.#rules.set('root', schema === undefined ? this.#primitive('object') : this.#expr(schema));
  }

  text(): string {
    const lines = [`root ::= ${this.#rules.get('root')!}`];
    for (const [name, body] of this.#rules) if (name !== 'root') lines.push(`${name} ::= ${body}`);
    // Each primitive's body may name others: add them until none is missing.
    const added = new Set<string>();
    for (let grew = true; grew;) {
      grew = false;
      for (const name of [...this.#used]) {
        if (added.has(name)) continue;
        added.add(name);
        grew = true;
        for (const other of Object.keys(PRIMITIVES) as (keyof typeof PRIMITIVES)[]) {
          if (new RegExp(`(^|[ (|])${other}([ )*?|]|$)`).test(PRIMITIVES[name])) this.#used.add(other);
        }
      }
    }
    for (const name of Object.keys(PRIMITIVES) as (keyof typeof PRIMITIVES)[]) if (this.#used.has(name)) lines.push(`${name} ::= ${PRIMITIVES[name]}`);
    return lines.join('\n') + '\n';
  }

  #primitive(name: keyof typeof PRIMITIVES): string {
    this.#used.add(name);
    return name;
  }

  /** A rule for `body`, named; returns its name. */
  #rule(body: string): string {
    const name = `r${this.#next++}`;
    this.#rules.set(name, body);
    return name;
  }

  #expr(s: Schema): string {
    if (typeof s['$ref'] === 'string') return defRule(/^#\/\$defs\/(.+)$/.exec(s['$ref'])![1]!);
    if ('const' in s) return literal(s['const']);
    if (Array.isArray(s['enum'])) return `(${s['enum'].map(literal).join(' | ')})`;
    if (Array.isArray(s['oneOf'])) return `(${(s['oneOf'] as Schema[]).map((alt) => this.#rule(this.#expr(alt))).join(' | ')})`;
    const type = Array.isArray(s['type']) ? (s['type'] as string[]) : [s['type'] as string];
    if (type.length > 1) return `(${type.map((t) => this.#rule(this.#expr({ ...s, type: t }))).join(' | ')})`;
    switch (type[0]) {
      case 'object':
        return this.#object(s);
      case 'array':
        return this.#array(s);
      case 'string':
        return this.#string(s);
      case 'integer':
      case 'number':
      case 'boolean':
      case 'null':
        return this.#primitive(type[0]);
      default:
        return this.#primitive('value');
    }
  }

  #string(s: Schema): string {
    if (s['format'] === 'date' || s['format'] === 'time') return `"\\"" ${this.#primitive(s['format'])} "\\""`;
    if (s['format'] === 'date-time') return `"\\"" ${this.#primitive('date')} "T" ${this.#primitive('time')} "\\""`;
    const min = typeof s['minLength'] === 'number' ? s['minLength'] : 0;
    const max = typeof s['maxLength'] === 'number' ? s['maxLength'] : undefined;
    if (min === 0 && max === undefined) return this.#primitive('string');
    return `"\\"" ${this.#primitive('char')}{${min},${max ?? ''}} "\\""`;
  }

  #object(s: Schema): string {
    const properties = Object.entries((s['properties'] as Schema | undefined) ?? {});
    const extra = s['additionalProperties'];
    const ws = this.#primitive('ws');
    const parts = properties.map(([key, value]) => `${literal(key)} ":" ${ws} ${this.#rule(this.#expr(value as Schema))}`);
    const declared = parts.join(` "," ${ws} `);
    if (extra === undefined || extra === false) return parts.length === 0 ? '"{" "}"' : `"{" ${declared} "}"`;
    const value = extra === true ? this.#primitive('value') : this.#rule(this.#expr(extra as Schema));
    const pair = this.#rule(`${this.#primitive('string')} ":" ${ws} ${value}`);
    if (parts.length === 0) return `"{" (${pair} ("," ${ws} ${pair})*)? "}"`;
    return `"{" ${declared} ("," ${ws} ${pair})* "}"`;
  }

  #array(s: Schema): string {
    const ws = this.#primitive('ws');
    const prefix = ((s['prefixItems'] as Schema[] | undefined) ?? []).map((item) => this.#rule(this.#expr(item)));
    const item = s['items'] === undefined ? this.#primitive('value') : this.#rule(this.#expr(s['items'] as Schema));
    const min = Math.max(0, (typeof s['minItems'] === 'number' ? s['minItems'] : 0) - prefix.length);
    const maxAll = typeof s['maxItems'] === 'number' ? s['maxItems'] : undefined;
    const max = maxAll === undefined ? undefined : Math.max(0, maxAll - prefix.length);
    const head = prefix.slice(0, maxAll ?? prefix.length);
    const sep = `"," ${ws}`;
    if (head.length > 0) {
      const rest = max === 0 ? '' : ` (${sep} ${item}){${min},${max ?? ''}}`;
      return `"[" ${head.join(` ${sep} `)}${rest} "]"`;
    }
    if (max === 0) return '"[" "]"';
    const more = `(${sep} ${item}){${Math.max(0, min - 1)},${max === undefined ? '' : max - 1}}`;
    return min > 0 ? `"[" ${item} ${more} "]"` : `"[" (${item} ${more})? "]"`;
  }
}

function defRule(name: string): string {
  return `def-${name.replace(/[^a-zA-Z0-9]/g, (c) => `-${c.charCodeAt(0).toString(16)}-`)}`;
}

/** A JSON value written as it must appear, as a GBNF string literal. */
function literal(value: unknown): string {
  const json = JSON.stringify(value);
  // JSON.stringify has already escaped every control character but DEL.
  return `"${json.replace(/[\\"]/g, (c) => `\\${c}`).replace(/\u007f/g, '\\x7F')}"`;
}
