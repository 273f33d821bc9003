/**
 * Bounds on the JSON schemas clients send (`format`, `response_format`, tool `parameters`).
 * Backends turn a schema into a grammar with recursive code in the runner process; a schema nested
 * a thousand levels deep overflows its stack and takes every request on that runner down with it.
 * So every surface checks a schema here, in the API process, before anything reaches a runner.
 *
 * @module
 */
import { Errors } from '../errors.js';

/** Deepest nesting of objects and arrays in a schema (64; real schemas rarely pass 10). */
export const SCHEMA_MAX_DEPTH = 64;
/** Most values (objects, arrays, strings, numbers...) in one schema (10,000). */
export const SCHEMA_MAX_NODES = 10_000;

/**
 * Throws a 400 naming `field` and the limit when `value` nests deeper than
 * {@link SCHEMA_MAX_DEPTH} or holds more than {@link SCHEMA_MAX_NODES} values. The walk is
 * iterative, so checking a hostile value cannot overflow this process's stack either.
 */
export function checkSchemaBounds(value: unknown, field: string): void {
  const stack: Array<[unknown, number]> = [[value, 1]];
  let nodes = 0;
  while (stack.length > 0) {
    const [v, depth] = stack.pop()!;
    if (++nodes > SCHEMA_MAX_NODES) {
      throw Errors.badRequest(`${field} is too large: a schema may hold at most ${SCHEMA_MAX_NODES} values`, { param: field });
    }
    if (v === null || typeof v !== 'object') continue;
    if (depth > SCHEMA_MAX_DEPTH) {
      throw Errors.badRequest(`${field} is nested too deeply: a schema may nest at most ${SCHEMA_MAX_DEPTH} levels`, { param: field });
    }
    for (const child of Array.isArray(v) ? v : Object.values(v)) stack.push([child, depth + 1]);
  }
}
